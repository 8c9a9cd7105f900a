/*
 * semaphore.pml: a Promela model of lockfleet's SEMAPHORE protocol
 * (lockcore/src/scripts.cc: kSemPrelude — sem_expire, sem_give_back,
 * sem_live, sem_hand_off, sem_bury — and SemAcquireScript,
 * SemReleaseScript, SemAbandonScript, SemRenewScript; client side:
 * LockCore::SemAcquireUntil, SemAbandon, SemRelease, SemHanded in
 * lockcore/src/semaphore.cc). model/README.md ("The semaphore model")
 * describes what it abstracts and the properties; scripts/model-check.sh
 * runs the sem-* checks.
 *
 * Conventions are those of fair_lock.pml: every Redis script is one d_step
 * (Lua scripts are atomic); time is not modelled, only the assumption every
 * lease makes (a set's lease ends only when no client is within its
 * validity on it, VALID_ON); a first try whose reply is lost ran before its
 * retry, or (-DLATE_TRY) is held up and runs at any later moment.
 * The semaphore's permits P = 2 are fixed (SemAddScript is not modelled);
 * each call asks for k = 1 or 2.
 *
 * Compile-time switches (spin -D...):
 *   NC=<n>              clients (default 2; 1..3)
 *   CHECK_BOOK          (a) used == sum of the sets' k, and used <= P
 *   CHECK_BELIEF        (b) every set a client believes it holds is in
 *                       Redis, live, with its k; their k sum to <= P
 *   CHECK_TOMB          (c) a call that ended cleanly (its release or
 *                       abandon ran, or it had nothing to tell Redis) has no
 *                       set in Redis afterwards, except an unclaimed
 *                       hand-off (bounded by the claim window)
 *   CHECK_TOMB_STRICT   (c) without that exception
 *                       (default: CHECK_BOOK and CHECK_BELIEF)
 *   TRY_CALLS           calls may also be TryAcquire (wait = 0: one try,
 *                       never queues)
 *   LATE_TRY            a first try may be held up in flight and run at
 *                       any later time (one per client and run)
 *   UNANSWERED=<k>      only clients 0..k-1 may get no reply to an
 *                       acquire's retry (default: all)
 *   NO_UNANSWERED_END   abandons and releases are always run (no crash, no
 *                       unanswered abandon)
 *   LIVENESS            the liveness configuration (ltl live0)
 *   UNBOUNDED_PARK      (with LIVENESS) a parked waiter wakes only when
 *                       woken (SemHanded: local wake or event, reliable
 *                       here), not by its park bound
 *   MUT_LISTEN_LATE     mutation: the wait slot is registered only when the
 *                       waiter parks, not before its first attempt: a wake
 *                       in between is lost (with UNBOUNDED_PARK, (d) fails)
 *   MUT_NO_BURY         mutation: sem_bury does nothing: (c) fails
 *   MUT_HANDOFF_NO_FIT  mutation: sem_hand_off hands to the head whether or
 *                       not its k fits: (a) fails
 *   MUT_CLAIM_KEEPS_WINDOW mutation: a claim does not set the claimer's
 *                       lease (the set keeps the claim window): (b) fails
 *   MUT_TRY_NO_LEAVE    mutation (the client before the fix of this
 *                       model's first finding): Leave abandons only when
 *                       `touched`, not when only `unsure` (a TryAcquire
 *                       whose first try's reply was lost): (c) fails
 *   MUT_RELEASE_KEEPS_QUEUE mutation (the script before the fix of its
 *                       second finding): SemReleaseScript does not remove
 *                       the id from the queue: strict (c) fails
 *   TRACE / NOHIDDEN    as in fair_lock.pml (readable BFS counter-examples)
 *   SEM_COVER=<n>       reachability probe n fails (REACHED(n))
 */

#ifndef NC
#define NC 2
#endif
#ifndef UNANSWERED
#define UNANSWERED NC
#endif
#define P 2                    /* the semaphore's permits (fixed) */

#if !defined(CHECK_BOOK) && !defined(CHECK_BELIEF) && !defined(CHECK_TOMB) && !defined(CHECK_TOMB_STRICT)
#define CHECK_BOOK
#define CHECK_BELIEF
#endif

#ifdef LATE_TRY
#define QMAX (NC + NC)         /* queue capacity (model bound, asserted) */
#define IMAX (NC + NC + NC + P)
#else
#define QMAX NC
#define IMAX (NC + P + 1)
#endif

/* ---------------------------------------------------------------- Redis */
/* Ids: a call's id (NextRequestId) is its waiter id and its set's id.
   Values 1..IMAX, renamed canonically after every step (gc); 0: none.     */
byte used;                 /* KEYS[1] field used                           */
byte s_k[IMAX + 1];        /* KEYS[1] field p:<id> = k (0: no set)         */
bool s_end[IMAX + 1];      /* KEYS[2] score <= now: its lease has ended
                              (taken back by the next sem_expire/sem_live) */
bool s_win[IMAX + 1];      /* ghost: its lease is a hand-off's claim window
                              (not claimed yet)                            */
byte q[QMAX];              /* KEYS[3] queue                                */
byte qlen;
byte w_k[IMAX + 1];        /* KEYS[4] waiters: "deadline|k" (0: no field)  */
bool w_lapsed[IMAX + 1];   /* its presence deadline has passed             */
bool tomb[IMAX + 1];       /* KEYS[6] semaphore:gone:<id> exists           */
bool g_over[IMAX + 1];     /* ghost: the call ended cleanly (its release or
                              abandon ran, or it had nothing to tell)      */
byte id_cl[IMAX + 1];      /* ghost: whose call the id is                  */

/* --------------------------------------------------------------- clients */
byte cl_id[NC];        /* the current call's id (also its Permits'), 0 none */
byte cl_k[NC];         /* its k                                            */
bool cl_wait[NC];      /* the acquisition call is going on                 */
bool cl_try[NC];       /* TryAcquire (wait = 0)                            */
bool cl_on[NC];        /* a try of the current attempt got the set (reply
                          taken or lost): the set's lease outlives the
                          client's validity (VALID_ON)                     */
bool cl_valid[NC];     /* ghost: validity (from before the send) not over  */
bool cl_bel[NC];       /* believes it holds its set within validity        */
bool cl_unsure[NC];    /* SemAcquireUntil's `unsure`: a try may have run
                          with its reply lost (tombstone at the end)       */
bool cl_touched[NC];   /* SemAcquireUntil's `touched`: Leave abandons      */
#ifdef LATE_TRY
byte late_st[NC];      /* held-up first try: 0 none yet; 1 in flight, call
                          going (or holding); 2 in flight, call returned
                          without permits; 3 in flight, the Permits ended;
                          4 it ran                                         */
byte late_id[NC];
byte late_k[NC];
bool late_wait[NC];
#endif
#ifdef UNBOUNDED_PARK
bool wake[NC];         /* the wait slot holds a wake (WaitTable::Slot)     */
bool parked[NC];       /* registered (MUT_LISTEN_LATE: only while parked)  */
#endif

#ifdef NOHIDDEN
#define HIDDEN
#else
#define HIDDEN hidden
#endif
HIDDEN byte i_, j_, v_, h_, n_, u_, g_res, g_k, free_, sum_, handed_, nh_;
HIDDEN byte map_[IMAX + 1], t_k[IMAX + 1], t_wk[IMAX + 1], t_cl[IMAX + 1];
HIDDEN byte t_end[IMAX + 1], t_win[IMAX + 1], t_lap[IMAX + 1],
            t_tomb[IMAX + 1], t_over[IMAX + 1];

#ifdef SEM_COVER
#define REACHED(k) assert(SEM_COVER != k)
#else
#define REACHED(k) skip
#endif

/* ------------------------------------------------------ small helpers */
inline q_pop() {                       /* LPOP KEYS[3] */
  i_ = 0;
  do
  :: i_ + 1 < qlen -> q[i_] = q[i_ + 1]; i_++
  :: else -> break
  od;
  qlen--;
  q[qlen] = 0
}

inline q_push(w) {                     /* RPUSH KEYS[3] id */
  assert(qlen < QMAX);                 /* model bound */
  q[qlen] = w;
  qlen++
}

inline q_remove(w) {                   /* LREM KEYS[3] 1 id */
  i_ = 0;
  do
  :: i_ < qlen && q[i_] != w -> i_++
  :: else -> break
  od;
  if
  :: i_ < qlen ->
     do
     :: i_ + 1 < qlen -> q[i_] = q[i_ + 1]; i_++
     :: else -> break
     od;
     qlen--;
     q[qlen] = 0
  :: else -> skip
  fi
}

inline hdel(w) {                       /* HDEL KEYS[4] id */
  w_k[w] = 0;
  w_lapsed[w] = false
}

inline drop_set(w) {                   /* HDEL p:<id>; ZREM KEYS[2] id */
  s_k[w] = 0; s_end[w] = false; s_win[w] = false
}

/* ------------------------------------------------------------ checks */
inline check_inv() {
#ifdef CHECK_BOOK
  /* (a) bookkeeping and safety: used is the sum of the sets' k (sets whose
     lease ended and not yet taken back count: they are still out), and
     never above P (P fixed: the permits when each set was granted). */
  sum_ = 0;
  v_ = 1;
  do
  :: v_ <= IMAX -> sum_ = sum_ + s_k[v_]; v_++
  :: else -> break
  od;
  assert(used == sum_);
  assert(used <= P);
#endif
#ifdef CHECK_BELIEF
  /* (b) no client believes it holds a set Redis does not have */
  sum_ = 0;
  j_ = 0;
  do
  :: j_ < NC ->
     if
     :: cl_bel[j_] ->
        assert(s_k[cl_id[j_]] == cl_k[j_] && !s_end[cl_id[j_]]);
        sum_ = sum_ + cl_k[j_]
     :: else -> skip
     fi;
     j_++
  :: else -> break
  od;
  assert(sum_ <= P);
#endif
#ifdef CHECK_TOMB
  /* (c) a call that ended cleanly has no set, except an unclaimed
     hand-off (its claim window bounds it) */
  v_ = 1;
  do
  :: v_ <= IMAX -> assert(!(g_over[v_] && s_k[v_] != 0 && !s_win[v_])); v_++
  :: else -> break
  od;
#endif
#ifdef CHECK_TOMB_STRICT
  v_ = 1;
  do
  :: v_ <= IMAX -> assert(!(g_over[v_] && s_k[v_] != 0)); v_++
  :: else -> break
  od;
#endif
  v_ = 0
}

/* ----------------------------------------------------------- renaming */
/* Ids are only compared for equality, so they are renamed to a canonical
   order (queue, clients' calls, held-up tries, then the other sets) after
   every step; an id nothing refers to any more (queue, set, client,
   held-up try) is dropped with its tombstone: no try of it can still run
   (the timing assumption: a held-up try reaches the server within its
   tombstone's life, lease + retry_latch). */
inline id_name(x) {
  if
  :: x != 0 && map_[x] == 0 -> n_++; map_[x] = n_
  :: else -> skip
  fi
}

inline gc() {
  v_ = 0;
  do
  :: v_ <= IMAX -> map_[v_] = 0; t_k[v_] = 0; t_wk[v_] = 0; t_cl[v_] = 0;
     t_end[v_] = 0; t_win[v_] = 0; t_lap[v_] = 0; t_tomb[v_] = 0; t_over[v_] = 0; v_++
  :: else -> break
  od;
  n_ = 0;
  i_ = 0;
  do
  :: i_ < qlen -> assert(w_k[q[i_]] != 0); id_name(q[i_]); i_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < NC -> id_name(cl_id[i_]); i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NC -> id_name(late_id[i_]); i_++
  :: else -> break
  od;
#endif
  v_ = 1;
  do
  :: v_ <= IMAX -> if :: s_k[v_] != 0 -> id_name(v_) :: else -> skip fi; v_++
  :: else -> break
  od;
  v_ = 1;
  do
  :: v_ <= IMAX ->
     if
     :: map_[v_] != 0 ->
        t_k[map_[v_]] = s_k[v_]; t_end[map_[v_]] = s_end[v_];
        t_win[map_[v_]] = s_win[v_]; t_wk[map_[v_]] = w_k[v_];
        t_lap[map_[v_]] = w_lapsed[v_]; t_tomb[map_[v_]] = tomb[v_];
        t_over[map_[v_]] = g_over[v_]; t_cl[map_[v_]] = id_cl[v_]
     :: else -> assert(w_k[v_] == 0)   /* waiters hash == queue */
     fi;
     v_++
  :: else -> break
  od;
  v_ = 1;
  do
  :: v_ <= IMAX ->
     s_k[v_] = t_k[v_]; s_end[v_] = t_end[v_]; s_win[v_] = t_win[v_];
     w_k[v_] = t_wk[v_]; w_lapsed[v_] = t_lap[v_]; tomb[v_] = t_tomb[v_];
     g_over[v_] = t_over[v_]; id_cl[v_] = t_cl[v_]; v_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < qlen -> q[i_] = map_[q[i_]]; i_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < NC -> cl_id[i_] = map_[cl_id[i_]]; i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NC -> late_id[i_] = map_[late_id[i_]]; i_++
  :: else -> break
  od;
#endif
  check_inv()
}

/* A new id (NextRequestId, unique per call): the smallest value nothing
   refers to (after gc the ids in use are 1..n). */
inline id_used(w) {
  u_ = (s_k[w] != 0 || w_k[w] != 0);
  j_ = 0;
  do
#ifdef LATE_TRY
  :: j_ < NC -> u_ = u_ || cl_id[j_] == w || late_id[j_] == w; j_++
#else
  :: j_ < NC -> u_ = u_ || cl_id[j_] == w; j_++
#endif
  :: else -> break
  od
}

inline alloc_id(w) {
  v_ = 1;
  do
  :: v_ <= IMAX -> id_used(v_); if :: u_ -> v_++ :: else -> break fi
  :: else -> assert(false)             /* model bound */
  od;
  w = v_;
  tomb[w] = false; g_over[w] = false   /* (dropped with the id already) */
}

/* ------------------------------------------- kSemPrelude (scripts.cc) */
/* live_head (kPrelude): drops waiters at the head whose presence deadline
   passed; h = the first live waiter id (0: none). */
inline live_head(h) {
  h = 0;
  do
  :: qlen == 0 -> break
  :: qlen > 0 && !w_lapsed[q[0]] -> h = q[0]; break
  :: qlen > 0 && w_lapsed[q[0]] -> REACHED(1); hdel(q[0]); q_pop()
  od
}

/* sem_expire: takes back the sets whose lease ended (at most 256 per call;
   the model has at most P = 2 sets: all). */
inline sem_expire() {
  v_ = 1;
  do
  :: v_ <= IMAX ->
     if
     :: s_k[v_] != 0 && s_end[v_] ->
        printf("  sem_expire: takes back the set of c%d's call (k %d)\n", id_cl[v_], s_k[v_]);
        if                             /* its holder has not released it */
        :: id_cl[v_] < NC && cl_id[id_cl[v_]] == v_ && !cl_wait[id_cl[v_]] -> REACHED(5)
        :: else -> skip
        fi;
        used = used - s_k[v_]; drop_set(v_)
     :: else -> skip
     fi;
     v_++
  :: else -> break
  od
}

/* sem_give_back(id): its permits are free; u_ = whether it was out. */
inline sem_give_back(w) {
  if
  :: s_k[w] != 0 -> used = used - s_k[w]; drop_set(w); u_ = 1
  :: else -> u_ = 0
  fi
}

/* sem_live(id): g_k = its k if out and its lease has not ended; else 0
   (an ended one is given back here). */
inline sem_live(w) {
  if
  :: s_k[w] != 0 && !s_end[w] -> g_k = s_k[w]
  :: s_k[w] != 0 && s_end[w] -> g_k = 0; sem_give_back(w)  /* (not reached:
        sem_expire, run first, takes back every ended set in the model) */
  :: else -> g_k = 0
  fi
}

/* A hand-off's wake: the caller of the script wakes the grantee (SemHanded:
   directly in its own process, else through an unlock event naming it;
   a waiter does not wake itself). Only the UNBOUNDED_PARK runs use it. */
inline note_handed(h) {
#ifdef UNBOUNDED_PARK
  if
  :: id_cl[h] < NC && cl_id[id_cl[h]] == h && cl_wait[id_cl[h]] ->
     handed_ = handed_ | (1 << id_cl[h])
  :: else -> skip
  fi
#else
  skip
#endif
}

/* sem_hand_off: while the first live waiter's k fits, it gets its set under
   its id, the claim window as its lease, and leaves the queue (strict
   FIFO: a head that does not fit stops it). */
inline sem_hand_off() {
  free_ = P - used;
  do
  :: true ->
     live_head(h_);
     if
     :: h_ == 0 -> break
#ifndef MUT_HANDOFF_NO_FIT
     :: h_ != 0 && w_k[h_] > free_ ->         /* k <= permits always here */
        if :: free_ > 0 -> REACHED(10) :: else -> skip fi;  /* strict FIFO */
        break
#endif
     :: else ->
        g_k = w_k[h_];
        q_pop();                                /* LPOP */
        hdel(h_);                               /* HDEL KEYS[4] head */
        /* HSETNX p:<head> k: a queued id never has a set (asserted, else
           the ZADD below would cut a live set's lease to the window) */
        assert(s_k[h_] == 0);
        s_k[h_] = g_k;
        used = used + g_k;
        free_ = free_ - g_k;
        s_end[h_] = false; s_win[h_] = true;    /* ZADD now + claim_ms */
        note_handed(h_);
        nh_++;
        printf("  sem_hand_off: to the waiter of c%d (that call still waiting: %d), k %d\n",
               id_cl[h_], id_cl[h_] < NC && cl_id[id_cl[h_]] == h_ && cl_wait[id_cl[h_]], g_k)
     fi
  od
}

/* sem_bury(ms): ms > 0 (the call was unsure): SET KEYS[6] 1 PX ms */
inline sem_bury(w, unsure) {
#ifndef MUT_NO_BURY
  if
  :: unsure -> tomb[w] = true; printf("  sem_bury: tombstone for c%d's call\n", id_cl[w])
  :: else -> skip
  fi
#else
  skip                                  /* mutation: no tombstone */
#endif
}

/* ------------------------------------------------ SemAcquireScript */
/* ARGV: id w, k, lease, presence, wait (ARGV[5]), claim window.
   Result g_res: 1 granted (g_k), 0 refused, 3 the tombstone (-3). */
inline sem_acquire(w, k, waitflag) {
  g_res = 0;
  if
  :: tomb[w] ->                                /* EXISTS KEYS[5] */
     REACHED(2);
     g_res = 3;
     printf("  SemAcquire(c%d's call, k %d): the call has ended (tombstone): -3\n", id_cl[w], k)
  :: else ->
     sem_expire();
     nh_ = 0;
     sem_hand_off();
     if :: nh_ > 0 -> REACHED(6) :: else -> skip fi;  /* freed by sem_expire */
     sem_live(w);
     if
     :: g_k != 0 ->
        /* Ours: the hand-off to us claimed, or a retry. ZADD
           max(end + 1, now + lease); leave the queue if in it. */
        if :: s_win[w] -> REACHED(3) :: else -> skip fi;
#ifndef MUT_CLAIM_KEEPS_WINDOW
        s_win[w] = false;
#endif
        if :: w_k[w] != 0 -> q_remove(w); hdel(w) :: else -> skip fi;
        g_res = 1;
        printf("  SemAcquire(c%d's call, k %d): its set is out: claimed\n", id_cl[w], k)
     :: else ->
        free_ = P - used;
        live_head(h_);
        if
        :: k <= free_ && (h_ == 0 || h_ == w) ->
           if :: h_ != 0 -> q_pop(); hdel(w) :: else -> skip fi;
           s_k[w] = k; used = used + k;          /* HSET p:<id> k; HINCRBY */
           s_end[w] = false; s_win[w] = false;   /* ZADD now + lease */
           g_k = k;
           g_res = 1;
           printf("  SemAcquire(c%d's call, k %d): granted (free %d)\n", id_cl[w], k, free_)
        :: else ->
           if
           :: waitflag ->
              if :: w_k[w] == 0 -> q_push(w) :: else -> skip fi;
              w_k[w] = k; w_lapsed[w] = false;   /* HSET deadline|k */
              printf("  SemAcquire(c%d's call, k %d): refused, queued (free %d)\n", id_cl[w], k, free_)
           :: else ->
              printf("  SemAcquire(c%d's call, k %d): refused, a try (free %d)\n", id_cl[w], k, free_)
           fi
        fi
     fi
  fi
}

/* ------------------------------------------------ SemReleaseScript */
/* ARGV: id, claim window, latch, gone_ms. Its reply is latched: a retry
   after a lost reply acts no more, so only one run is modelled. */
inline sem_release(w, unsure) {
#ifndef MUT_RELEASE_KEEPS_QUEUE
  /* leave the queue, as the abandon does (a held-up try may have queued
     the id again after its grant) */
  if :: w_k[w] != 0 -> q_remove(w); hdel(w) :: else -> skip fi;
#endif
  sem_expire();
  sem_live(w);
  if
  :: g_k != 0 -> sem_give_back(w); g_res = 1
  :: else -> g_res = 0
  fi;
  if :: !g_res -> REACHED(7) :: else -> skip fi;
  printf("  SemRelease(c%d's set): %d\n", id_cl[w], g_res);
  sem_bury(w, unsure);
  sem_hand_off()
}

/* ------------------------------------------------ SemAbandonScript */
inline sem_abandon(w, unsure) {
  if :: w_k[w] != 0 -> q_remove(w); hdel(w) :: else -> skip fi;
  sem_expire();
  sem_give_back(w);
  if :: u_ -> REACHED(4) :: else -> skip fi;
  printf("  SemAbandon(c%d's call): gave back a set: %d\n", id_cl[w], u_);
  sem_bury(w, unsure);
  sem_hand_off()
}

/* -------------------------------------------------- SemRenewScript */
inline sem_renew(w) {
  g_res = (s_k[w] != 0 && !s_end[w])
}

/* ------------------------------------------------------- client side */
/* The caller of a script got its reply: SemHanded wakes the grantees.
   Listen first: a grantee's slot is registered for its whole call. */
inline deliver_wakes(self) {
#ifdef UNBOUNDED_PARK
  j_ = 0;
  do
  :: j_ < NC ->
     if
#ifdef MUT_LISTEN_LATE
     :: (handed_ >> j_) & 1 && j_ != self && parked[j_] -> wake[j_] = true
     :: (handed_ >> j_) & 1 && j_ != self && !parked[j_] ->
        printf("c%d: the wake for its hand-off is lost (slot not registered yet)\n", j_)
#else
     :: (handed_ >> j_) & 1 && j_ != self -> wake[j_] = true
#endif
     :: else -> skip
     fi;
     j_++
  :: else -> break
  od;
  handed_ = 0
#else
  skip
#endif
}

inline new_call(c, k, try) {
  alloc_id(v_);
  cl_id[c] = v_; id_cl[v_] = c;
  cl_k[c] = k; cl_try[c] = try;
  cl_wait[c] = true;
  cl_unsure[c] = false; cl_touched[c] = false;
  cl_on[c] = false; cl_valid[c] = false; cl_bel[c] = false;
#ifdef UNBOUNDED_PARK
  wake[c] = false;
#ifdef MUT_LISTEN_LATE
  parked[c] = false;
#else
  parked[c] = true;                    /* listen first: Register */
#endif
#endif
  printf("c%d: new call (TryAcquire: %d), k %d\n", c, try, k);
  gc()
}

inline start_attempt(c) {
  cl_valid[c] = true;                  /* validity counts from the send */
  cl_on[c] = false;
  handed_ = 0
}

/* The attempt's (last try's) reply reaches the client. */
inline take_reply(c, got) {
  assert(g_res != 3);                  /* a going call meets no tombstone */
  if
  :: g_res == 1 ->
     cl_on[c] = true;
     cl_touched[c] = true;
     cl_wait[c] = false;
     cl_bel[c] = cl_valid[c];          /* lost at once if validity ran out */
     printf("c%d: reply: granted, k %d, believes it holds: %d\n", c, cl_k[c], cl_bel[c]);
     got = 1
  :: else ->
     cl_on[c] = false;
     cl_valid[c] = false;
     if :: !cl_try[c] -> cl_touched[c] = true :: else -> skip fi;  /* wait || touched */
     got = 0
  fi;
  deliver_wakes(c);
  gc()
}

/* EvalRetryOnce: the first try's reply is lost: may_have_run, so unsure. */
inline note_lost_reply(c) {
  cl_unsure[c] = true;
#ifndef MUT_TRY_NO_LEAVE
  cl_touched[c] = true;   /* Leave abandons (with the tombstone) when
                             unsure, a try-only call too */
#endif
  cl_on[c] = (g_res == 1);
  handed_ = 0;                         /* its handed list is lost too */
  gc()
}

/* The retry gets no reply either: EvalRetryOnce throws with
   may_have_run: touched = unsure = true. */
inline try_failed(c) {
  printf("c%d: no reply to the retry either: the try throws\n", c);
  cl_touched[c] = true; cl_unsure[c] = true;
  cl_on[c] = false; cl_valid[c] = false;
  handed_ = 0;
  gc()
}

#ifdef LATE_TRY
inline late_over(c, st) {
  if :: late_st[c] == 1 -> late_st[c] = st :: else -> skip fi
}
#endif

/* The call returns without permits; clean: Redis was told (the abandon
   ran) or there was nothing to tell (not touched). */
inline end_call(c, clean) {
#ifdef LATE_TRY
  late_over(c, 2);
#endif
  g_over[cl_id[c]] = clean;
  printf("c%d: the call returns without permits\n", c);
  cl_id[c] = 0; cl_k[c] = 0; cl_wait[c] = false; cl_try[c] = false;
  cl_unsure[c] = false; cl_touched[c] = false;
  cl_on[c] = false; cl_valid[c] = false; cl_bel[c] = false;
#ifdef UNBOUNDED_PARK
  wake[c] = false; parked[c] = false;
#endif
  gc()
}

/* The Permits end: released (clean: the release ran), or dropped (the
   process crashed, or the release got no answer and did not run). */
inline end_hold(c, clean) {
#ifdef LATE_TRY
  late_over(c, 3);
#endif
  g_over[cl_id[c]] = clean;
  cl_id[c] = 0; cl_k[c] = 0; cl_wait[c] = false; cl_try[c] = false;
  cl_unsure[c] = false; cl_touched[c] = false;
  cl_on[c] = false; cl_valid[c] = false; cl_bel[c] = false;
  gc()
}

#ifdef TRY_CALLS
#define NEW_CALLS(c) \
  :: d_step { new_call(c, 1, false) } \
  :: d_step { new_call(c, 2, false) } \
  :: d_step { c != 0; new_call(c, 1, true) } \
  :: d_step { c != 0; new_call(c, 2, true) }
#else
#define NEW_CALLS(c) \
  :: d_step { new_call(c, 1, false) } \
  :: d_step { new_call(c, 2, false) }
#endif

#define SEM_ACQUIRE(c) sem_acquire(cl_id[c], cl_k[c], !cl_try[c])

/* One client thread making semaphore acquisitions one after the other
   (SemAcquireUntil), holding, releasing. */
proctype Client(byte c) {
  byte got;

Idle:
  if
  NEW_CALLS(c)
  fi;

Attempt:
  /* EvalRetryOnce(SemAcquireScript, id, k, lease, presence, wait, claim) */
  if
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              SEM_ACQUIRE(c); take_reply(c, got) };
     goto Answered
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              SEM_ACQUIRE(c);
              printf("c%d: reply lost (the script ran); retrying\n", c);
              note_lost_reply(c) }
#ifdef LATE_TRY
  :: d_step { late_st[c] == 0;
              start_attempt(c);
              printf("c%d: attempt; the try is held up on the way (not run yet); retrying\n", c);
              late_st[c] = 1; late_id[c] = cl_id[c]; late_k[c] = cl_k[c];
              late_wait[c] = !cl_try[c];
              g_res = 0; note_lost_reply(c) }
#endif
  fi;
  /* the reply is lost; time passes before the retry */
  if
  :: skip
#ifdef LIVENESS
  :: d_step { c != 0; try_failed(c) }; goto GiveUp  /* an outage ends a
        call of another client (bounded: outage_grace); client 0's tries
        are always answered in the end */
#else
  :: d_step { cl_valid[c] = false;
              printf("c%d: validity ran out before the retry\n", c) }
  :: d_step { c < UNANSWERED; SEM_ACQUIRE(c); try_failed(c) };  /* ran */
     goto Threw
  :: d_step { c < UNANSWERED; try_failed(c) }; goto Threw      /* not run */
#endif
  fi;
  d_step { SEM_ACQUIRE(c); take_reply(c, got) };

Answered:
  if
  :: got == 1 && cl_bel[c] -> got = 0; goto Hold
  :: got == 1 && !cl_bel[c] -> got = 0; goto Lost
#ifndef LIVENESS
  :: d_step { got == 1 && c < UNANSWERED;  /* min_replicas: WAIT fell short
                (or the LockClient is stopping): TryOnce throws, Leave */
              printf("c%d: granted, but the grant is not kept (replicas short)\n", c);
              got = 0; cl_bel[c] = false; cl_on[c] = false; cl_valid[c] = false;
              gc() };
     goto GiveUp
#endif
  :: got == 0 && cl_try[c] -> goto GiveUp       /* a try: returns */
  :: got == 0 && !cl_try[c] -> goto Refused
  fi;

Threw:
  /* TryOnce threw (an outage): a try returns (throws); a wait rides it
     out (parks, backed off) or gives up (deadline, outage_grace). */
  if
  :: cl_try[c] -> goto GiveUp
  :: else -> goto Refused
  fi;

Refused:
  /* Parked on the wait slot (registered before the first attempt: listen
     first), bounded by min(time left, park_cap, presence / 3, the earliest
     lease end + 1 ms). A wake (local, event; lost, late, forged alike) or
     the bound only leads to the next attempt, which the model allows at
     any moment. */
#ifdef UNBOUNDED_PARK
#ifdef MUT_LISTEN_LATE
  if :: d_step { parked[c] = true } fi;         /* Register now */
#endif
  if
  :: d_step { wake[c] -> wake[c] = false;
#ifdef MUT_LISTEN_LATE
              parked[c] = false;
#endif
              printf("c%d: woken\n", c) };
     goto Attempt
  :: c != 0 -> goto GiveUp
  fi;
#else
  if
  :: goto Attempt
#ifdef LIVENESS
  :: c != 0 -> goto GiveUp                      /* client 0 never gives up */
#else
  :: goto GiveUp                                /* timed out, cancelled */
#endif
  fi;
#endif

GiveUp:
  /* Leave: if touched, SemAbandon(id, unsure ? lease + retry_latch : 0)
     (its reply latched: a lost reply's retry acts no more) */
  if
  :: d_step { !cl_touched[c];
              printf("c%d: Leave: not touched, no SemAbandon (unsure: %d)\n", c, cl_unsure[c]);
              end_call(c, true) }
  :: d_step { cl_touched[c];
              printf("c%d: gives up: SemAbandon (tombstone: %d)\n", c, cl_unsure[c]);
              sem_abandon(cl_id[c], cl_unsure[c]);
              deliver_wakes(c);
              end_call(c, true) }
#if !defined(LIVENESS) && !defined(NO_UNANSWERED_END)
  :: d_step { cl_touched[c];
              /* no answer (SemAbandon returns false): modelled as not
                 run, its queue entry lapsing at once (as fair_lock.pml) */
              printf("c%d: gives up: SemAbandon gets no answer (not run)\n", c);
              if :: w_k[cl_id[c]] != 0 -> q_remove(cl_id[c]); hdel(cl_id[c]) :: else -> skip fi;
              end_call(c, false) }
#endif
  fi;
  goto Idle;

Hold:
#ifdef LIVENESS
  goto Release;                        /* the work is done, eventually */
#else
  if
  :: d_step {                          /* watchdog: SemRenewScript */
       sem_renew(cl_id[c]);
       if
       :: !g_res -> printf("c%d: renewal: not ours: lost\n", c);
                    cl_bel[c] = false; cl_valid[c] = false
       :: else -> skip
       fi;
       gc()
     };
     if :: cl_bel[c] -> goto Hold :: else -> goto Lost fi
  :: d_step { printf("c%d: validity ran out\n", c);
              cl_bel[c] = false; cl_valid[c] = false; gc() };
     goto Lost
  :: goto Release
  fi;
#endif

Lost:
#if !defined(LIVENESS) && !defined(NO_UNANSWERED_END)
  if
  :: goto Release
  :: d_step { printf("c%d: crashes, or its release gets no answer (not run)\n", c);
              end_hold(c, false) };
     goto Idle
  fi;
#endif

Release:
  /* Permits::Release: SemRelease(id, gone_ms = unsure ? lease +
     retry_latch : 0); latched, so a lost reply's retry acts no more. */
  if                                   /* (the label may not be on a d_step) */
  :: d_step { printf("c%d: releases (tombstone: %d)\n", c, cl_unsure[c]);
              cl_bel[c] = false; cl_valid[c] = false;
              sem_release(cl_id[c], cl_unsure[c]);
              deliver_wakes(c);
              end_hold(c, true) }
  fi;
  goto Idle
}

/* ------------------------------------------------------- environment */
/* A set's lease may end only when no client is within its validity on it
   (a set a try got while validity was on; the client counts from before
   the send, Redis from the script). */
#define VALID_ON(k, w) (cl_valid[k] && cl_on[k] && cl_id[k] == w)
#if NC == 1
#define ANY_VALID(w) (VALID_ON(0, w))
#elif NC == 2
#define ANY_VALID(w) (VALID_ON(0, w) || VALID_ON(1, w))
#elif NC == 3
#define ANY_VALID(w) (VALID_ON(0, w) || VALID_ON(1, w) || VALID_ON(2, w))
#else
#error "NC must be 1..3"
#endif
#ifdef MUT_CLAIM_KEEPS_WINDOW
#define END_BLOCKED(w) (ANY_VALID(w) && !s_win[w])
#else
#define END_BLOCKED(w) (ANY_VALID(w))
#endif

#ifdef LIVENESS
/* Liveness: time only removes what nobody will refresh: an unclaimed
   hand-off to, or the queue entry of, a call that has returned. */
#define CALL_OVER(w) (id_cl[w] >= NC || cl_id[id_cl[w]] != w)
#define EXPIRY_OK(w) (s_win[w] && CALL_OVER(w))
#define LAPSE_OK(w) (CALL_OVER(w))
#else
#define EXPIRY_OK(w) (true)
#define LAPSE_OK(w) (true)
#endif

#define END(w) \
  :: d_step { s_k[w] != 0 && !s_end[w] && !END_BLOCKED(w) && EXPIRY_OK(w) -> \
              s_end[w] = true; \
              if :: s_win[w] -> REACHED(8) :: else -> skip fi; \
              printf("redis: the lease of c%d's set ends (claim window: %d)\n", id_cl[w], s_win[w]); \
              gc() }

#define LAPSE(k) \
  :: d_step { qlen > k && !w_lapsed[q[k]] && LAPSE_OK(q[k]) -> w_lapsed[q[k]] = true; \
              printf("redis: presence of a waiter of c%d lapses\n", id_cl[q[k]]); gc() }

#ifdef LATE_TRY
inline late_run(k) {
  if
  :: late_st[k] == 1 -> printf("redis: the held-up try of c%d runs now, its call (or its set) still going\n", k)
  :: late_st[k] == 2 -> printf("redis: the held-up try of c%d runs now, after its call returned without permits\n", k)
  :: late_st[k] == 3 -> printf("redis: the held-up try of c%d runs now, after its Permits ended\n", k)
  fi;
  sem_acquire(late_id[k], late_k[k], late_wait[k]);
  if :: g_res == 1 && late_st[k] == 1 -> REACHED(9) :: else -> skip fi;
  late_st[k] = 4; late_id[k] = 0; late_k[k] = 0; late_wait[k] = false;
  handed_ = 0;                          /* nobody gets its reply */
  gc()
}
#define LATE(k) \
  :: d_step { late_st[k] >= 1 && late_st[k] <= 3 -> late_run(k) }
#endif

active proctype Env() {
  do
  END(1)
  END(2)
  END(3)
#if IMAX > 3
  END(4)
#endif
#if IMAX > 4
  END(5)
#endif
#if IMAX > 5
  END(6)
#endif
#if IMAX > 6
  END(7)
#endif
#if IMAX > 7
  END(8)
#endif
#if IMAX > 8
  END(9)
#endif
#if IMAX > 9
  END(10)
#endif
#if IMAX > 10
  END(11)
#endif
  LAPSE(0)
#if QMAX > 1
  LAPSE(1)
#endif
#if QMAX > 2
  LAPSE(2)
#endif
#if QMAX > 3
  LAPSE(3)
#endif
#if QMAX > 4
  LAPSE(4)
#endif
#if QMAX > 5
  LAPSE(5)
#endif
#ifdef LATE_TRY
  LATE(0)
#if NC > 1
  LATE(1)
#endif
#if NC > 2
  LATE(2)
#endif
#endif
  od
}

init {
  atomic {
    i_ = 0;
    do
    :: i_ < NC -> run Client(i_); i_++
    :: else -> break
    od
  }
}

#ifdef LIVENESS
/* (d) under weak fairness, a waiter that does not give up (client 0) is
   granted: its permits are handed to it and it is woken to claim them, or
   it gets them itself. */
ltl live0 { [] (cl_wait[0] -> <> cl_bel[0]) }
#endif
