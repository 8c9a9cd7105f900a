/* C11 threads on top of pthreads, preloaded into ThreadSanitizer test runs.
 *
 * Why: Debian 12's librdkafka creates its threads with C11 thrd_create() and
 * locks with mtx_*() / cnd_*(). glibc implements those by calling its
 * internal pthread functions directly, and GCC 12's libtsan intercepts only
 * the public pthread_*() entry points. So TSan never learns about
 * librdkafka's threads (an instrumented callback running on one crashes
 * with "SEGV on unknown address" in TSan's own thread state) nor about its
 * locks (false races). Forwarding each C11 call to the public pthread_*()
 * function — which, in a TSan process, resolves to TSan's interceptor —
 * fixes both. glibc's mtx_t, cnd_t and once_flag have the layout of
 * pthread_mutex_t, pthread_cond_t and pthread_once_t, which is what glibc
 * itself relies on.
 *
 * scripts/build.sh --sanitize thread builds this into
 * build-tsan/libtsan-c11-threads.so; scripts/test.sh sets LD_PRELOAD to it
 * for the TSan stage. Not for production use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int Result(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case EBUSY:
      return thrd_busy;
    case ETIMEDOUT:
      return thrd_timedout;
    default:
      return thrd_error;
  }
}

struct Start {
  thrd_start_t func;
  void* arg;
};

static void* Trampoline(void* p) {
  struct Start start = *(struct Start*)p;
  free(p);
  return (void*)(intptr_t)start.func(start.arg);
}

int thrd_create(thrd_t* thr, thrd_start_t func, void* arg) {
  struct Start* start = malloc(sizeof *start);
  if (start == NULL) return thrd_nomem;
  start->func = func;
  start->arg = arg;
  int err = pthread_create(thr, NULL, Trampoline, start);
  if (err != 0) free(start);
  return Result(err);
}

int thrd_join(thrd_t thr, int* res) {
  void* value = NULL;
  int err = pthread_join(thr, &value);
  if (err == 0 && res != NULL) *res = (int)(intptr_t)value;
  return Result(err);
}

int thrd_detach(thrd_t thr) { return Result(pthread_detach(thr)); }

int mtx_init(mtx_t* mtx, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (type & mtx_recursive) {
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  }
  int err = pthread_mutex_init((pthread_mutex_t*)mtx, &attr);
  pthread_mutexattr_destroy(&attr);
  return Result(err);
}

int mtx_lock(mtx_t* mtx) { return Result(pthread_mutex_lock((pthread_mutex_t*)mtx)); }

int mtx_timedlock(mtx_t* restrict mtx, const struct timespec* restrict ts) {
  return Result(pthread_mutex_timedlock((pthread_mutex_t*)mtx, ts));
}

int mtx_trylock(mtx_t* mtx) { return Result(pthread_mutex_trylock((pthread_mutex_t*)mtx)); }

int mtx_unlock(mtx_t* mtx) { return Result(pthread_mutex_unlock((pthread_mutex_t*)mtx)); }

void mtx_destroy(mtx_t* mtx) { pthread_mutex_destroy((pthread_mutex_t*)mtx); }

int cnd_init(cnd_t* cond) { return Result(pthread_cond_init((pthread_cond_t*)cond, NULL)); }

int cnd_signal(cnd_t* cond) { return Result(pthread_cond_signal((pthread_cond_t*)cond)); }

int cnd_broadcast(cnd_t* cond) { return Result(pthread_cond_broadcast((pthread_cond_t*)cond)); }

int cnd_wait(cnd_t* cond, mtx_t* mtx) {
  return Result(pthread_cond_wait((pthread_cond_t*)cond, (pthread_mutex_t*)mtx));
}

int cnd_timedwait(cnd_t* restrict cond, mtx_t* restrict mtx,
                  const struct timespec* restrict ts) {
  return Result(pthread_cond_timedwait((pthread_cond_t*)cond, (pthread_mutex_t*)mtx, ts));
}

void cnd_destroy(cnd_t* cond) { pthread_cond_destroy((pthread_cond_t*)cond); }

void call_once(once_flag* flag, void (*func)(void)) {
  pthread_once((pthread_once_t*)flag, func);
}

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is a pthread_cond_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is a pthread_once_t");
