/*
 * rwlock.pml: a Promela model of lockfleet's READ-WRITE LOCK protocol
 * (lockcore/src/scripts.cc: kSemPrelude — sem_free, sem_expire,
 * sem_give_back, sem_live, rw_next_fence, sem_create, sem_hand_off,
 * sem_bury — and RwAcquireScript; release and give-up are
 * SemReleaseScript, renewal SemRenewScript; client side:
 * LockCore::RwAcquireUntil (rwlock.cc: `fresh`), SemAcquireUntil with a
 * SetAsk, SemAbandon, SemRelease, SemHanded in lockcore/src/semaphore.cc).
 * Derived from semaphore.pml (same conventions, same faults); the lock is a
 * semaphore of P permits whose sets have owners: a read set takes 1, a
 * write set all P. model/README.md ("The read-write lock model") describes
 * what it abstracts and the properties; scripts/model-check.sh runs the
 * rw-* checks.
 *
 * Slots: a slot is one Permits (RwLease) and the acquisition call that
 * gets it. By default (NEST) slots 0 and 1 are ONE thread of one client,
 * owner token 1 (the thread's default token): it makes one call at a time;
 * slot 1 calls only while slot 0 holds its lease (a nested acquisition:
 * read beside read, read beside write -> downgrade, write beside write,
 * write beside read -> upgrade refused), slot 0 only while slot 1 is idle.
 * Every other slot is a thread of its own (owner = slot). With NO_NEST
 * slot s is owner s + 1 (NS owners).
 *
 * Compile-time switches (spin -D...):
 *   NS=<n>            slots (default 3; 2..3)
 *   NO_NEST           every slot its own thread and owner
 *   SHARED_OWNER      (with NEST) slots 0 and 1 are two threads (or
 *                     processes) sharing a custom owner token 1
 *                     (RwOptions::owner: fresh is never sent): no
 *                     one-call-at-a-time or nesting constraint
 *   CHECK_EXCL        (a) never a write set beside a set of another owner:
 *                     in Redis, and among the slots that believe they hold
 *   CHECK_BELIEF      (b) every set a slot believes it holds is in Redis,
 *                     live, with its mode and owner
 *   CHECK_BOOK        (c) used, the owners' set and write-set counts (n:, x:)
 *                     exact; used <= P but for one owner's sets beside its
 *                     write set
 *   CHECK_TOKEN       (t) a new writer token exceeds every token in use;
 *                     every slot that believes it holds has the last
 *                     writer token (a writer: its own; a reader: the last
 *                     writer's)
 *   CHECK_FIFO        (f) a set is created other than reentrantly only for
 *                     the first live waiter, or with no live waiter queued
 *                     ahead (a reader behind a queued writer waits for it)
 *   CHECK_ALL_HANDED  (h) after every script that hands off, the first live
 *                     waiter does not fit (a release hands the lock to
 *                     every reader at the head, up to the next writer)
 *   CHECK_UPGRADE     (u) a write set is never created for an owner that
 *                     holds only read sets
 *   CHECK_REENTRY     (r) a call of a thread whose other lease is held
 *                     (believed) is never refused: granted at once, or -4
 *                     (an upgrade) if it asks to write
 *   CHECK_TOMB        (g) a call that ended cleanly has no set in Redis
 *                     afterwards, except an unclaimed hand-off
 *                     (default: all but CHECK_TOMB)
 *   READERS=<m>       the slots whose bit is set in m only read (default 0)
 *   WRITERS=<m>       the slots whose bit is set in m only write (default 0)
 *   TRY_CALLS         slots other than 0 may make TryAcquire calls
 *   LATE_TRY          a first try may be held up and run at any later time
 *                     (one per slot and run)
 *   LATE_MASK=<m>     (with LATE_TRY) only the slots whose bit is set in m
 *                     (default: all)
 *   UNANSWERED=<k>    only slots 0..k-1 may get no reply to an acquire's
 *                     retry (default: all)
 *   NO_UNANSWERED_END releases and give-ups always run (no crash)
 *   NO_LEASE_END      leases and claim windows never end, validity never
 *                     runs out (no stalls); presences still lapse
 *   NO_EXPIRY         NO_LEASE_END, and presences never lapse either
 *   LIVENESS          the liveness configuration (ltl live0)
 *   UNBOUNDED_PARK    (with LIVENESS) a parked waiter wakes only when a
 *                     hand-off's wake reaches it (SemHanded: directly in its
 *                     own client, else the kPermits event naming it)
 * Mutations (each must be caught):
 *   MUT_ANY_MODE      the reentrancy check ignores the mode: a write asked
 *                     by an owner holding only reads is granted past the
 *                     queue (no -4)
 *   MUT_HANDOFF_SKIP  sem_hand_off looks past a head that does not fit (a
 *                     writer) and grants the readers behind it
 *   MUT_HANDOFF_ONE   sem_hand_off grants one waiter per call
 *   MUT_FREE_COUNTS   sem_free does not decrement the owner's n: / x:
 *   MUT_TRY_HEAD      a TryAcquire (wait = 0) ignores the queue head in
 *                     fair mode
 *   MUT_TOKEN_EACH    every write set takes a new writer token (also a
 *                     reentrant one)
 *   MUT_EVENT_FIRST   SemHanded's kPermits event names only the first
 *                     remote grantee (with UNBOUNDED_PARK)
 *   MUT_LISTEN_LATE   the wait slot is registered at the park, not before
 *                     the first attempt (with UNBOUNDED_PARK)
 *   MUT_NO_UPGRADE_HANDOFF the model's finding (README), re-introduced: the
 *                     -4 branch leaves the queue without handing off again
 *   TRACE / NOHIDDEN  readable BFS counter-examples
 *   COVER             reachability probes: LOCKFLEET_COVER=<n> in pan's
 *                     environment turns probe n into a failing assertion
 */

#ifndef NS
#define NS 3
#endif
#ifndef UNANSWERED
#define UNANSWERED NS
#endif
#define P 8                    /* kRwPermits, abstracted: more than the read
                                  sets the model can have out (asserted) */
#ifndef NO_NEST
#define NEST
#endif
#ifdef NEST
#define NO (NS - 1)            /* owners */
#define OWN(s) ((s) == 0 -> 1 : (s))
#define NESTED(s) ((s) <= 1)   /* one of the two slots of owner 1 */
#else
#define NO NS
#define OWN(s) ((s) + 1)
#define NESTED(s) (false)
#endif
#define KOF(w) ((w) -> P : 1)  /* k of a write / read set */
#define OTHER(s) ((s) == 0 -> 1 : 0)   /* the thread's other slot (NESTED) */
mtype = { read, write };
#define MODE(w) ((w) -> write : read)
#define KMODE(k) ((k) > 1 -> write : read)

#if !defined(CHECK_EXCL) && !defined(CHECK_BELIEF) && !defined(CHECK_BOOK) && !defined(CHECK_TOKEN) && !defined(CHECK_FIFO) && !defined(CHECK_ALL_HANDED) && !defined(CHECK_UPGRADE) && !defined(CHECK_REENTRY) && !defined(CHECK_TOMB)
#define CHECK_EXCL
#define CHECK_BELIEF
#define CHECK_BOOK
#define CHECK_TOKEN
#define CHECK_FIFO
#define CHECK_ALL_HANDED
#define CHECK_UPGRADE
#define CHECK_REENTRY
#endif

#ifdef NO_EXPIRY
#define NO_LEASE_END
#endif

#ifndef READERS
#define READERS 0
#endif
#ifndef WRITERS
#define WRITERS 0
#endif
#define MAY_READ(c) (!((WRITERS >> (c)) & 1))
#define MAY_WRITE(c) (!((READERS >> (c)) & 1))

#ifndef LATE_MASK
#define LATE_MASK 7
#endif

#ifdef LATE_TRY
#define QMAX (NS + NS)
#define IMAX (NS + NS + 2)
#else
#define QMAX NS
#define IMAX (NS + 2)
#endif
#define TMAX (IMAX + NS + 2)   /* token values (renamed, order kept) */

/* ---------------------------------------------------------------- Redis */
byte used;                 /* KEYS[1] used                                 */
byte r_fence;              /* KEYS[1] fence: the last writer token (0 none) */
byte o_n[NO + 1];          /* KEYS[1] n:<owner>: its sets out              */
byte o_x[NO + 1];          /* KEYS[1] x:<owner>: its write sets out        */
byte s_k[IMAX + 1];        /* p:<id> = k (0: no set; 1 read; P write)      */
byte s_own[IMAX + 1];      /* o:<id>                                       */
byte s_tok[IMAX + 1];      /* t:<id>                                       */
bool s_end[IMAX + 1];      /* KEYS[2] score <= now: its lease has ended    */
bool s_win[IMAX + 1];      /* ghost: its lease is a hand-off's claim window */
byte q[QMAX];              /* KEYS[3] queue                                */
byte qlen;
byte w_k[IMAX + 1];        /* KEYS[4] waiters: "deadline|k|owner" (0: none) */
byte w_own[IMAX + 1];
bool w_lapsed[IMAX + 1];   /* its presence deadline has passed             */
bool tomb[IMAX + 1];       /* KEYS[5]/[6] rwlock:gone:<id>                 */
bool g_over[IMAX + 1];     /* ghost: the call ended cleanly                */
byte id_cl[IMAX + 1];      /* ghost: whose call (slot) the id is           */

/* ---------------------------------------------------------------- slots */
byte cl_id[NS];        /* the current call's id (also its set's), 0 none   */
bool cl_w[NS];         /* a write call (k = P), else a read (k = 1)        */
bool cl_wait[NS];      /* the acquisition call is going on                 */
bool cl_try[NS];       /* TryAcquire (wait = 0)                            */
bool cl_fresh[NS];     /* ARGV[8]: the thread's token holds nothing here    */
bool cl_on[NS];        /* a try of the current attempt got the set (VALID_ON) */
bool cl_valid[NS];     /* ghost: validity (from before the send) not over  */
bool cl_bel[NS];       /* believes it holds its set within validity        */
bool cl_has[NS];       /* has its RwLease (granted, not yet released/ended) */
byte cl_tok[NS];       /* the lease's token                                */
bool cl_unsure[NS];    /* SemAcquireUntil's `unsure`                       */
bool cl_touched[NS];   /* SemAcquireUntil's `touched`                      */
#ifdef LATE_TRY
byte late_st[NS];      /* 0 none yet; 1 in flight, call going (or holding);
                          2 in flight, call returned without the lock;
                          3 in flight, the lease ended; 4 it ran           */
byte late_id[NS];
bool late_w[NS];
bool late_wait[NS];
bool late_fresh[NS];
#endif
#ifdef UNBOUNDED_PARK
bool wake[NS];         /* the wait slot holds a wake                       */
bool parked[NS];       /* registered (MUT_LISTEN_LATE: only while parked)  */
#endif

#ifdef NOHIDDEN
#define HIDDEN
#else
#define HIDDEN hidden
#endif
HIDDEN byte i_, j_, v_, h_, n_, u_, g_res, g_k, g_tok, sum_, mine_, wr_, nh_, wo_;
HIDDEN byte hl_[NS + 1], hn_;        /* the script's handed list (slots) */
HIDDEN byte map_[IMAX + 1], t_k[IMAX + 1], t_own[IMAX + 1], t_tok[IMAX + 1],
            t_wk[IMAX + 1], t_wo[IMAX + 1], t_cl[IMAX + 1];
HIDDEN byte t_end[IMAX + 1], t_win[IMAX + 1], t_lap[IMAX + 1],
            t_tomb[IMAX + 1], t_over[IMAX + 1];
HIDDEN byte tmap_[TMAX + 1];
byte g_left;               /* sets whose call is over (a function of the
                              state: adds no states); bound: one at a time */

#ifdef COVER
hidden byte cover_k;                   /* not in the state: set once */
#define REACHED(k) assert(cover_k != k)
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
  w_k[w] = 0; w_own[w] = 0;
  w_lapsed[w] = false
}

/* leave_queue(): HDEL KEYS[4] id == 1 -> LREM KEYS[3] id */
inline leave_queue(w) {
  if :: w_k[w] != 0 -> q_remove(w); hdel(w) :: else -> skip fi
}

/* ------------------------------------------------------------ checks */
inline check_inv() {
#ifdef CHECK_EXCL
  /* (a) Redis: a write set's owner owns every set out (its own sets
     whose lease ended and that no script took back yet included) */
  wo_ = 0;
  v_ = 1;
  do
  :: v_ <= IMAX -> if :: s_k[v_] > 1 -> wo_ = s_own[v_] :: else -> skip fi; v_++
  :: else -> break
  od;
  v_ = 1;
  do
  :: v_ <= IMAX -> assert(wo_ == 0 || s_k[v_] == 0 || s_own[v_] == wo_); v_++
  :: else -> break
  od;
  /* ... and among the slots that believe they hold */
  wo_ = 0;
  j_ = 0;
  do
  :: j_ < NS -> if :: cl_bel[j_] && cl_w[j_] -> wo_ = OWN(j_) :: else -> skip fi; j_++
  :: else -> break
  od;
  j_ = 0;
  do
  :: j_ < NS -> assert(wo_ == 0 || !cl_bel[j_] || OWN(j_) == wo_); j_++
  :: else -> break
  od;
#endif
#ifdef CHECK_BELIEF
  /* (b) no slot believes in a set Redis does not have */
  j_ = 0;
  do
  :: j_ < NS ->
     assert(!cl_bel[j_] || (s_k[cl_id[j_]] == KOF(cl_w[j_]) && !s_end[cl_id[j_]] &&
                            s_own[cl_id[j_]] == OWN(j_)));
     j_++
  :: else -> break
  od;
#endif
#ifdef CHECK_BOOK
  /* (c) bookkeeping: used = sum of k, the owners' counts exact; used <= P
     unless a write set is out (then (a): all sets are its owner's) */
  sum_ = 0; wo_ = 0;
  v_ = 1;
  do
  :: v_ <= IMAX -> sum_ = sum_ + s_k[v_]; if :: s_k[v_] > 1 -> wo_ = 1 :: else -> skip fi; v_++
  :: else -> break
  od;
  assert(used == sum_);
  assert(used <= P || wo_ != 0);
  assert(used < P || wo_ != 0);        /* a read always fits when no write
                                          is out (the abstraction of P) */
  j_ = 1;
  do
  :: j_ <= NO ->
     mine_ = 0; wr_ = 0;
     v_ = 1;
     do
     :: v_ <= IMAX ->
        if
        :: s_k[v_] != 0 && s_own[v_] == j_ -> mine_++; if :: s_k[v_] > 1 -> wr_++ :: else -> skip fi
        :: else -> skip
        fi;
        v_++
     :: else -> break
     od;
     assert(o_n[j_] == mine_ && o_x[j_] == wr_);
     j_++
  :: else -> break
  od;
  mine_ = 0; wr_ = 0;
#endif
#ifdef CHECK_TOKEN
  /* (t) a slot that believes it holds has the last writer token */
  j_ = 0;
  do
  :: j_ < NS -> assert(!cl_bel[j_] || cl_tok[j_] == r_fence); j_++
  :: else -> break
  od;
#endif
#ifdef CHECK_TOMB
  v_ = 1;
  do
  :: v_ <= IMAX -> assert(!(g_over[v_] && s_k[v_] != 0 && !s_win[v_])); v_++
  :: else -> break
  od;
#endif
  v_ = 0; j_ = 0; wo_ = 0
}

/* (f) FIFO: the grantee w has no live waiter ahead of it in the queue (if
   it is not queued: no live waiter at all) */
inline fifo_check(w) {
#ifdef CHECK_FIFO
  i_ = 0;
  do
  :: i_ < qlen && q[i_] != w -> assert(w_lapsed[q[i_]]); i_++
  :: else -> break
  od;
  i_ = 0
#else
  skip
#endif
}

/* (h) after a script that handed off: the first live waiter does not fit */
inline all_handed() {
#ifdef CHECK_ALL_HANDED
  i_ = 0;
  do
  :: i_ < qlen && w_lapsed[q[i_]] -> i_++
  :: else -> break
  od;
  assert(i_ >= qlen || used + w_k[q[i_]] > P);
  i_ = 0
#else
  skip
#endif
}

/* ----------------------------------------------------------- renaming */
/* Ids are only compared for equality: renamed canonically after every
   step (queue, slots' calls, held-up tries, other sets); an id nothing
   refers to any more is dropped with its tombstone (as in semaphore.pml).
   Tokens are only compared for order and equality: renamed to 1..m,
   order kept (0 = never written stays 0), over the tokens in use (the
   fence, the sets', the leases'). */
inline id_name(x) {
  if
  :: x != 0 && map_[x] == 0 -> n_++; map_[x] = n_
  :: else -> skip
  fi
}

inline tok_mark(t) {
  if :: t != 0 -> tmap_[t] = 1 :: else -> skip fi
}

inline tok_gc() {
  v_ = 0;
  do
  :: v_ <= TMAX -> tmap_[v_] = 0; v_++
  :: else -> break
  od;
  tok_mark(r_fence);
  v_ = 1;
  do
  :: v_ <= IMAX -> if :: s_k[v_] != 0 -> tok_mark(s_tok[v_]) :: else -> s_tok[v_] = 0 fi; v_++
  :: else -> break
  od;
  j_ = 0;
  do
  :: j_ < NS -> if :: cl_has[j_] -> tok_mark(cl_tok[j_]) :: else -> cl_tok[j_] = 0 fi; j_++
  :: else -> break
  od;
  n_ = 0;
  v_ = 1;
  do
  :: v_ <= TMAX -> if :: tmap_[v_] != 0 -> n_++; tmap_[v_] = n_ :: else -> skip fi; v_++
  :: else -> break
  od;
  r_fence = tmap_[r_fence];
  v_ = 1;
  do
  :: v_ <= IMAX -> s_tok[v_] = tmap_[s_tok[v_]]; v_++
  :: else -> break
  od;
  j_ = 0;
  do
  :: j_ < NS -> cl_tok[j_] = tmap_[cl_tok[j_]]; j_++
  :: else -> break
  od;
  n_ = 0
}

inline gc() {
  v_ = 0;
  do
  :: v_ <= IMAX -> map_[v_] = 0; t_k[v_] = 0; t_own[v_] = 0; t_tok[v_] = 0;
     t_wk[v_] = 0; t_wo[v_] = 0; t_cl[v_] = 0; t_end[v_] = 0; t_win[v_] = 0;
     t_lap[v_] = 0; t_tomb[v_] = 0; t_over[v_] = 0; v_++
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
  :: i_ < NS -> id_name(cl_id[i_]); i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NS -> id_name(late_id[i_]); i_++
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
        t_k[map_[v_]] = s_k[v_]; t_own[map_[v_]] = s_own[v_]; t_tok[map_[v_]] = s_tok[v_];
        t_end[map_[v_]] = s_end[v_]; t_win[map_[v_]] = s_win[v_];
        t_wk[map_[v_]] = w_k[v_]; t_wo[map_[v_]] = w_own[v_]; t_lap[map_[v_]] = w_lapsed[v_];
        t_tomb[map_[v_]] = tomb[v_]; t_over[map_[v_]] = g_over[v_]; t_cl[map_[v_]] = id_cl[v_]
     :: else -> assert(w_k[v_] == 0)   /* waiters hash == queue */
     fi;
     v_++
  :: else -> break
  od;
  v_ = 1;
  do
  :: v_ <= IMAX ->
     s_k[v_] = t_k[v_]; s_own[v_] = t_own[v_]; s_tok[v_] = t_tok[v_];
     s_end[v_] = t_end[v_]; s_win[v_] = t_win[v_];
     w_k[v_] = t_wk[v_]; w_own[v_] = t_wo[v_]; w_lapsed[v_] = t_lap[v_];
     tomb[v_] = t_tomb[v_]; g_over[v_] = t_over[v_]; id_cl[v_] = t_cl[v_]; v_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < qlen -> q[i_] = map_[q[i_]]; i_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < NS -> cl_id[i_] = map_[cl_id[i_]]; i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NS -> late_id[i_] = map_[late_id[i_]]; i_++
  :: else -> break
  od;
#endif
  tok_gc();
  count_left();
  check_inv()
}

/* A new id: the smallest value nothing refers to. */
inline id_used(w) {
  u_ = (s_k[w] != 0 || w_k[w] != 0);
  j_ = 0;
  do
#ifdef LATE_TRY
  :: j_ < NS -> u_ = u_ || cl_id[j_] == w || late_id[j_] == w; j_++
#else
  :: j_ < NS -> u_ = u_ || cl_id[j_] == w; j_++
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
  tomb[w] = false; g_over[w] = false
}

/* Sets whose call is over (crashed holders, unanswered ends). */
inline count_left() {
  g_left = 0;
  v_ = 1;
  do
  :: v_ <= IMAX -> if :: s_k[v_] != 0 && (id_cl[v_] >= NS || cl_id[id_cl[v_]] != v_) -> g_left++
                   :: else -> skip fi; v_++
  :: else -> break
  od
}

/* ------------------------------------------- kSemPrelude (scripts.cc) */
/* live_head (kPrelude): drops waiters at the head whose presence passed. */
inline live_head(h) {
  h = 0;
  do
  :: qlen == 0 -> break
  :: qlen > 0 && !w_lapsed[q[0]] -> h = q[0]; break
  :: qlen > 0 && w_lapsed[q[0]] -> hdel(q[0]); q_pop()
  od
}

/* sem_free(id): the set leaves, its permits are free, its owner's counts
   go down (HINCRBY -1, HDEL at 0). */
inline sem_free(w) {
  used = used - s_k[w];
#ifndef MUT_FREE_COUNTS
  o_n[s_own[w]] = o_n[s_own[w]] - 1;
  if :: s_k[w] > 1 -> o_x[s_own[w]] = o_x[s_own[w]] - 1 :: else -> skip fi;
#endif
  s_k[w] = 0; s_own[w] = 0; s_tok[w] = 0; s_end[w] = false; s_win[w] = false
}

/* sem_expire: takes back the sets whose lease ended (all, here). */
inline sem_expire() {
  v_ = 1;
  do
  :: v_ <= IMAX ->
     if
     :: s_k[v_] != 0 && s_end[v_] ->
        printf("  sem_expire: takes back the %e set of c%d's call (owner %d)\n",
               KMODE(s_k[v_]), id_cl[v_], s_own[v_]);
        if                             /* its holder still has its lease */
        :: s_k[v_] > 1 && id_cl[v_] < NS && cl_id[id_cl[v_]] == v_ && cl_has[id_cl[v_]] -> REACHED(8)
        :: else -> skip
        fi;
        sem_free(v_)
     :: else -> skip
     fi;
     v_++
  :: else -> break
  od
}

/* sem_give_back(id) -> u_ */
inline sem_give_back(w) {
  if
  :: s_k[w] != 0 -> sem_free(w); u_ = 1
  :: else -> u_ = 0
  fi
}

/* sem_live(id) -> g_k (0: not out, or ended; sem_expire ran first) */
inline sem_live(w) {
  if
  :: s_k[w] != 0 && !s_end[w] -> g_k = s_k[w]
  :: else -> g_k = 0
  fi
}

/* rw_next_fence: fence + 1 (never below the clock: not modelled) */
inline rw_next_fence() {
#ifdef CHECK_TOKEN
  /* (t) the new token exceeds every token in use */
  v_ = 1;
  do
  :: v_ <= IMAX -> assert(s_k[v_] == 0 || s_tok[v_] <= r_fence); v_++
  :: else -> break
  od;
  j_ = 0;
  do
  :: j_ < NS -> assert(!cl_has[j_] || cl_tok[j_] <= r_fence); j_++
  :: else -> break
  od;
#endif
  assert(r_fence < TMAX);              /* model bound */
  r_fence++;
  g_tok = r_fence
}

/* sem_create(id, k, ends, owner): HSETNX p:<id> (a new set here: asserted),
   used + k, o:, n: + 1; token = fence, or (a write, x: 0 -> 1) a new
   writer token; t:<id>. The caller sets s_win (ZADD ends). */
inline rw_create(w, k, own) {
  assert(s_k[w] == 0);
#ifdef CHECK_UPGRADE
  /* (u) never a write for an owner that holds only reads */
  assert(k == 1 || o_n[own] == 0 || o_x[own] > 0);
#endif
  if :: k == 1 && o_x[own] > 0 -> REACHED(5) :: else -> skip fi;
  if :: k > 1 && o_x[own] > 0 -> REACHED(6) :: else -> skip fi;
  s_k[w] = k; s_own[w] = own; used = used + k;
  o_n[own] = o_n[own] + 1;
  g_tok = r_fence;
  if
  :: k > 1 ->
     o_x[own] = o_x[own] + 1;
#ifdef MUT_TOKEN_EACH
     rw_next_fence()
#else
     if :: o_x[own] == 1 -> rw_next_fence() :: else -> skip fi
#endif
  :: else -> skip
  fi;
  s_tok[w] = g_tok;
  s_end[w] = false
}

/* A hand-off's wake (SemHanded): the handed list, in order */
inline note_handed(h) {
  if
  :: id_cl[h] < NS && cl_id[id_cl[h]] == h && cl_wait[id_cl[h]] ->
     hl_[hn_] = id_cl[h] + 1; hn_++
  :: else -> skip
  fi
}

inline hand_to(h) {
  g_k = w_k[h]; u_ = w_own[h];
  hdel(h);                             /* (LPOP / the mutation's LREM) */
  rw_create(h, g_k, u_);
  s_win[h] = true;                     /* ZADD now + claim_ms */
  note_handed(h);
  nh_++;
  printf("  sem_hand_off: %e set to the waiter of c%d (still waiting: %d), owner %d, token %d\n",
         KMODE(g_k), id_cl[h],
         id_cl[h] < NS && cl_id[id_cl[h]] == h && cl_wait[id_cl[h]], u_, g_tok)
}

/* sem_hand_off: while the first live waiter fits, it gets its set (claim
   window) and leaves the queue; strict FIFO: a head that does not fit
   stops it. */
inline sem_hand_off() {
  nh_ = 0;
  do
  :: true ->
     live_head(h_);
     if
     :: h_ == 0 -> break
     :: h_ != 0 && used + w_k[h_] > P ->
#ifdef MUT_HANDOFF_SKIP
        /* mutation: look past the head for a waiter that fits */
        i_ = 1;
        do
        :: i_ < qlen && (w_lapsed[q[i_]] || used + w_k[q[i_]] > P) -> i_++
        :: else -> break
        od;
        if
        :: i_ < qlen -> h_ = q[i_]; fifo_check(h_); q_remove(h_); hand_to(h_)
        :: else -> break
        fi
#else
        break
#endif
     :: else ->
        fifo_check(h_);
        q_pop();
        hand_to(h_)
#ifdef MUT_HANDOFF_ONE
        ; break
#endif
     fi
  od;
  if :: nh_ > 1 -> REACHED(4) :: else -> skip fi
}

/* sem_bury(ms): ms > 0 (the call was unsure): the tombstone */
inline sem_bury(w, unsure) {
  if
  :: unsure -> tomb[w] = true; printf("  sem_bury: tombstone for c%d's call\n", id_cl[w])
  :: else -> skip
  fi
}

/* ------------------------------------------------- RwAcquireScript */
/* ARGV: id w, k, lease, presence, wait, claim, owner, fresh, fair (1).
   g_res: 1 granted (g_tok), 0 refused (queued if wait), 3 the tombstone
   (-3), 4 an upgrade (-4). */
inline rw_acquire(w, wmode, own, waitflag, fresh) {
  g_res = 0; hn_ = 0;
  if
  :: tomb[w] ->
     REACHED(7);
     g_res = 3;
     printf("  RwAcquire(c%d's call): the call has ended (tombstone): -3\n", id_cl[w])
  :: else ->
     sem_expire();
     sem_hand_off();
     sem_live(w);
     if
     :: g_k != 0 ->
        /* Ours: a hand-off claimed, or a retry. ZADD max(end + 1, now +
           lease); leave the queue. */
        if :: s_win[w] && s_k[w] > 1 -> REACHED(9) :: else -> skip fi;
        s_win[w] = false;
        leave_queue(w);
        g_res = 1; g_tok = s_tok[w];
        printf("  RwAcquire(c%d's call, owner %d): its set is out: claimed (token %d)\n", id_cl[w], own, g_tok)
     :: else ->
        if
        :: fresh -> mine_ = 0; wr_ = 0
        :: else -> mine_ = o_n[own]; wr_ = o_x[own]
        fi;
        if
#ifndef MUT_ANY_MODE
        :: wmode && mine_ > 0 && wr_ == 0 ->   /* an upgrade: refused */
           leave_queue(w);
#ifndef MUT_NO_UPGRADE_HANDOFF
           sem_hand_off();                     /* (the model's finding) */
#endif
           g_res = 4;
           REACHED(2);
           printf("  RwAcquire(c%d's call, write, owner %d): the owner holds only reads: -4\n", id_cl[w], own)
#endif
        :: else ->
           live_head(h_);
           if
#ifdef MUT_TRY_HEAD
           :: mine_ > 0 || (used + KOF(wmode) <= P && (h_ == 0 || h_ == w || !waitflag)) ->
#else
           :: mine_ > 0 || (used + KOF(wmode) <= P && (h_ == 0 || h_ == w)) ->
#endif
              if
              :: mine_ == 0 -> fifo_check(w)
              :: else -> if :: !wmode && h_ != 0 && h_ != w && w_k[h_] > 1 -> REACHED(3) :: else -> skip fi
              fi;
              leave_queue(w);
              rw_create(w, KOF(wmode), own);
              s_win[w] = false;
              g_res = 1;
              if
              :: mine_ > 0 -> printf("  RwAcquire(c%d's call, %e, owner %d): granted (reentrant, past the queue), token %d\n",
                                     id_cl[w], MODE(wmode), own, g_tok)
              :: else -> printf("  RwAcquire(c%d's call, %e, owner %d): granted, token %d\n",
                                id_cl[w], MODE(wmode), own, g_tok)
              fi
           :: else ->
              if :: !waitflag && h_ != 0 && used + KOF(wmode) <= P -> REACHED(10) :: else -> skip fi;
              if :: fresh && o_n[own] > 0 -> REACHED(11) :: else -> skip fi;
              if
              :: waitflag ->
                 if :: w_k[w] == 0 -> q_push(w) :: else -> skip fi;
                 w_k[w] = KOF(wmode); w_own[w] = own; w_lapsed[w] = false;
                 printf("  RwAcquire(c%d's call, %e, owner %d): refused, queued\n", id_cl[w],
                        MODE(wmode), own)
              :: else ->
                 printf("  RwAcquire(c%d's call, %e, owner %d): refused, a try\n", id_cl[w],
                        MODE(wmode), own)
              fi
           fi
        fi
     fi;
     mine_ = 0; wr_ = 0;
     all_handed()
  fi
}

/* ------------------------------------------------ SemReleaseScript */
/* A release (Permits::Release) and a give-up (SemAbandon) are one script;
   its reply is latched: one run modelled. */
inline sem_release(w, unsure) {
  hn_ = 0;
  leave_queue(w);
  sem_expire();
  sem_live(w);
  if
  :: g_k != 0 -> sem_give_back(w); g_res = 1
  :: else -> g_res = 0                 /* not out (sem_expire ran first) */
  fi;
  sem_bury(w, unsure);
  sem_hand_off();
  all_handed()
}

/* -------------------------------------------------- SemRenewScript */
inline sem_renew(w) {
  g_res = (s_k[w] != 0 && !s_end[w])
}

/* ------------------------------------------------------- client side */
/* SemHanded: the caller of a script wakes the grantees: its own client's
   directly, the others' through ONE kPermits event naming all of them.
   Reliable here (UNBOUNDED_PARK); a lost event is what the park bound is
   for (the default runs: a parked waiter may attempt at any moment). */
#ifdef MUT_LISTEN_LATE
#define WAKE(x) if :: parked[x] -> wake[x] = true \
                   :: else -> printf("c%d: the wake for its hand-off is lost (slot not registered yet)\n", x) fi
#else
#define WAKE(x) wake[x] = true
#endif
inline deliver_wakes(self) {
#ifdef UNBOUNDED_PARK
  j_ = 0; u_ = 0;
  do
  :: j_ < hn_ ->
     v_ = hl_[j_] - 1;
     if
     :: v_ == self -> skip             /* a waiter does not wake itself */
     :: v_ != self && NESTED(v_) && NESTED(self) -> WAKE(v_)   /* local */
     :: else ->                        /* another client: the event */
#ifdef MUT_EVENT_FIRST
        if
        :: u_ == 0 -> u_ = 1; WAKE(v_)
        :: else -> printf("c%d: not named by the event (only the first remote grantee is)\n", v_)
        fi
#else
        WAKE(v_)
#endif
     fi;
     hl_[j_] = 0;
     j_++
  :: else -> break
  od;
  j_ = 0; v_ = 0; u_ = 0;
#endif
  hn_ = 0
}

inline new_call(c, wmode, try) {
  alloc_id(v_);
  cl_id[c] = v_; id_cl[v_] = c;
  cl_w[c] = wmode; cl_try[c] = try;
#if defined(NEST) && !defined(SHARED_OWNER)
  cl_fresh[c] = !(NESTED(c) && cl_bel[OTHER(c)]);   /* rw_owned_ of the token */
#elif defined(NEST)
  cl_fresh[c] = !NESTED(c);            /* a custom owner: never fresh */
#else
  cl_fresh[c] = true;
#endif
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
  printf("c%d: new %e call, owner %d (TryAcquire: %d, fresh: %d)\n", c,
         MODE(wmode), OWN(c), try, cl_fresh[c]);
  gc()
}

inline start_attempt(c) {
  cl_valid[c] = true;
  cl_on[c] = false;
  hn_ = 0
}

#define RW_ACQUIRE(c) rw_acquire(cl_id[c], cl_w[c], OWN(c), !cl_try[c], cl_fresh[c])

/* The attempt's (last try's) reply reaches the client. */
inline take_reply(c, got) {
  assert(g_res != 3);                  /* a going call meets no tombstone */
#ifdef CHECK_REENTRY
  /* (r) the thread holds its other lease: never refused */
  if
  :: NESTED(c) && cl_bel[OTHER(c)] -> assert(g_res == 1 || (g_res == 4 && cl_w[c]))
  :: else -> skip
  fi;
#endif
  if
  :: g_res == 1 ->
     cl_on[c] = true;
     cl_touched[c] = true;
     cl_wait[c] = false;
     cl_has[c] = true;
     cl_tok[c] = g_tok;
     cl_bel[c] = cl_valid[c];
     if :: NESTED(c) && cl_bel[c] && cl_bel[OTHER(c)] && cl_w[OTHER(c)] && !cl_w[c] -> REACHED(12)
     :: else -> skip fi;
     printf("c%d: reply: granted %e, token %d, believes it holds: %d\n", c,
            MODE(cl_w[c]), g_tok, cl_bel[c]);
     got = 1
  :: g_res == 4 ->
     cl_on[c] = false; cl_valid[c] = false;
     if :: !cl_try[c] -> cl_touched[c] = true :: else -> skip fi;
     printf("c%d: reply: -4, an upgrade: the call throws kInvalidArgument\n", c);
     got = 4
  :: else ->
     cl_on[c] = false;
     cl_valid[c] = false;
     if :: !cl_try[c] -> cl_touched[c] = true :: else -> skip fi;  /* wait || touched */
     got = 0
  fi;
  deliver_wakes(c);
  gc()
}

/* EvalRetryOnce: the first try's reply is lost: may_have_run, so unsure */
inline note_lost_reply(c) {
  cl_unsure[c] = true;
  cl_touched[c] = true;
  cl_on[c] = (g_res == 1);
  hn_ = 0;                             /* its handed list is lost too */
  gc()
}

inline try_failed(c) {
  printf("c%d: no reply to the retry either: the try throws\n", c);
  cl_touched[c] = true; cl_unsure[c] = true;
  cl_on[c] = false; cl_valid[c] = false;
  hn_ = 0;
  gc()
}

#ifdef LATE_TRY
inline late_over(c, st) {
  if :: late_st[c] == 1 -> late_st[c] = st :: else -> skip fi
}
#endif

inline clear_slot(c) {
  cl_id[c] = 0; cl_w[c] = false; cl_wait[c] = false; cl_try[c] = false;
  cl_fresh[c] = false; cl_unsure[c] = false; cl_touched[c] = false;
  cl_on[c] = false; cl_valid[c] = false; cl_bel[c] = false; cl_has[c] = false;
  cl_tok[c] = 0
}

/* The call returns without the lock; clean: the abandon ran, or nothing
   to tell */
inline end_call(c, clean) {
#ifdef LATE_TRY
  late_over(c, 2);
#endif
  g_over[cl_id[c]] = clean;
  printf("c%d: the call returns without the lock\n", c);
  clear_slot(c);
#ifdef UNBOUNDED_PARK
  wake[c] = false; parked[c] = false;
#endif
  gc()
}

/* The lease ends: released (clean), or dropped (crash / no answer) */
inline end_hold(c, clean) {
#ifdef LATE_TRY
  late_over(c, 3);
#endif
  g_over[cl_id[c]] = clean;
  clear_slot(c);
  gc()
}

/* A slot may start a call: NEST, one thread: slot 1 only while slot 0 has
   its lease (nested), slot 0 only while slot 1 is idle. */
#if defined(NEST) && !defined(SHARED_OWNER)
#define MAY_CALL(c) ((c) > 1 || ((c) == 0 && cl_id[1] == 0) || ((c) == 1 && cl_has[0]))
#else
#define MAY_CALL(c) (true)
#endif

#ifdef TRY_CALLS
#define NEW_CALLS(c) \
  :: d_step { MAY_CALL(c) && MAY_READ(c) -> new_call(c, false, false) } \
  :: d_step { MAY_CALL(c) && MAY_WRITE(c) -> new_call(c, true, false) } \
  :: d_step { MAY_CALL(c) && MAY_READ(c) && c != 0 -> new_call(c, false, true) } \
  :: d_step { MAY_CALL(c) && MAY_WRITE(c) && c != 0 -> new_call(c, true, true) }
#else
#define NEW_CALLS(c) \
  :: d_step { MAY_CALL(c) && MAY_READ(c) -> new_call(c, false, false) } \
  :: d_step { MAY_CALL(c) && MAY_WRITE(c) -> new_call(c, true, false) }
#endif

#if defined(LIVENESS) || defined(NO_UNANSWERED_END)
#define MAY_LEAVE_SET (false)
#else
#define MAY_LEAVE_SET (true)
#endif

/* One slot: acquisitions one after the other (SemAcquireUntil with a
   SetAsk: mode, owner, fresh, fair), holding, releasing. */
proctype Client(byte c) {
  byte got;

Idle:
  if
  NEW_CALLS(c)
  fi;

Attempt:
  if
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              RW_ACQUIRE(c); take_reply(c, got) };
     goto Answered
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              RW_ACQUIRE(c);
              printf("c%d: reply lost (the script ran); retrying\n", c);
              note_lost_reply(c) }
#ifdef LATE_TRY
  :: d_step { late_st[c] == 0 && ((LATE_MASK >> c) & 1);
              start_attempt(c);
              printf("c%d: attempt; the try is held up on the way (not run yet); retrying\n", c);
              late_st[c] = 1; late_id[c] = cl_id[c]; late_w[c] = cl_w[c];
              late_wait[c] = !cl_try[c]; late_fresh[c] = cl_fresh[c];
              g_res = 0; note_lost_reply(c) }
#endif
  fi;
  /* the reply is lost; time passes before the retry */
  if
  :: skip
#ifdef LIVENESS
  :: d_step { c != 0; try_failed(c) }; goto GiveUp
#else
#ifndef NO_LEASE_END
  :: d_step { cl_valid[c] = false;
              printf("c%d: validity ran out before the retry\n", c) }
#endif
  :: d_step { c < UNANSWERED; RW_ACQUIRE(c); try_failed(c) }; goto Threw
  :: d_step { c < UNANSWERED; try_failed(c) }; goto Threw
#endif
  fi;
  d_step { RW_ACQUIRE(c); take_reply(c, got) };

Answered:
  if
  :: got == 1 && cl_bel[c] -> got = 0; goto Hold
  :: got == 1 && !cl_bel[c] -> got = 0; goto Lost
#ifndef LIVENESS
  :: d_step { got == 1 && c < UNANSWERED;  /* min_replicas: WAIT fell short */
              printf("c%d: granted, but the grant is not kept (replicas short)\n", c);
              got = 0; cl_bel[c] = false; cl_has[c] = false; cl_on[c] = false;
              cl_valid[c] = false; gc() };
     goto GiveUp
#endif
  :: got == 4 -> got = 0; goto GiveUp             /* kInvalidArgument */
  :: got == 0 && cl_try[c] -> goto GiveUp
  :: got == 0 && !cl_try[c] -> goto Refused
  fi;

Threw:
  if
  :: cl_try[c] -> goto GiveUp
  :: else -> goto Refused
  fi;

Refused:
  /* Parked (listen first), bounded: the model lets a waiter attempt at any
     moment (a wake, lost or not, or the bound); UNBOUNDED_PARK: only a wake */
#ifdef UNBOUNDED_PARK
#ifdef MUT_LISTEN_LATE
  if :: d_step { parked[c] = true } fi;
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
  :: c != 0 -> goto GiveUp
#else
  :: goto GiveUp
#endif
  fi;
#endif

GiveUp:
  /* Leave: if touched || unsure, SemAbandon(id, unsure ? gone : 0) */
  if
  :: d_step { !cl_touched[c] && !cl_unsure[c];
              printf("c%d: Leave: not touched, no SemAbandon\n", c);
              end_call(c, true) }
  :: d_step { cl_touched[c] || cl_unsure[c];
              printf("c%d: gives up: SemAbandon (tombstone: %d)\n", c, cl_unsure[c]);
              sem_release(cl_id[c], cl_unsure[c]);
              printf("  SemRelease (give-up of c%d): gave back a set: %d\n", c, g_res);
              if :: g_res -> REACHED(13) :: else -> skip fi;
              deliver_wakes(c);
              end_call(c, true) }
  :: d_step { MAY_LEAVE_SET && (cl_touched[c] || cl_unsure[c]) && g_left == 0;
              /* (bound: one leftover set at a time) */
              printf("c%d: gives up: SemAbandon gets no answer (not run)\n", c);
              leave_queue(cl_id[c]);   /* its entry lapses (as semaphore.pml) */
              end_call(c, false) }
  fi;
  goto Idle;

Hold:
#ifdef LIVENESS
  goto Release;
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
#ifndef NO_LEASE_END
  :: d_step { printf("c%d: validity ran out (a stall)\n", c);
              cl_bel[c] = false; cl_valid[c] = false; gc() };
     goto Lost
#endif
  :: goto Release
  fi;
#endif

Lost:
  if
  :: goto Release
  :: d_step { MAY_LEAVE_SET && g_left == 0;
              printf("c%d: crashes, or its release gets no answer (not run)\n", c);
              end_hold(c, false) };
     goto Idle
  fi;

Release:
  if
  :: d_step { printf("c%d: releases its %e lease (tombstone: %d)\n", c,
                     MODE(cl_w[c]), cl_unsure[c]);
              if :: NESTED(c) && cl_w[c] && cl_bel[OTHER(c)] && !cl_w[OTHER(c)] -> REACHED(1)
              :: else -> skip fi;
              cl_bel[c] = false; cl_valid[c] = false;
              sem_release(cl_id[c], cl_unsure[c]);
              printf("  SemRelease(c%d's set): %d\n", c, g_res);
              deliver_wakes(c);
              end_hold(c, true) }
  fi;
  goto Idle
}

/* ------------------------------------------------------- environment */
#define VALID_ON(k, w) (cl_valid[k] && cl_on[k] && cl_id[k] == w)
#if NS == 2
#define ANY_VALID(w) (VALID_ON(0, w) || VALID_ON(1, w))
#elif NS == 3
#define ANY_VALID(w) (VALID_ON(0, w) || VALID_ON(1, w) || VALID_ON(2, w))
#else
#error "NS must be 2..3"
#endif

#ifdef LIVENESS
#define CALL_OVER(w) (id_cl[w] >= NS || cl_id[id_cl[w]] != w)
#define EXPIRY_OK(w) (s_win[w] && CALL_OVER(w))
#define LAPSE_OK(w) (CALL_OVER(w))
#else
#define EXPIRY_OK(w) (true)
#define LAPSE_OK(w) (true)
#endif

#define END(w) \
  :: d_step { s_k[w] != 0 && !s_end[w] && !ANY_VALID(w) && EXPIRY_OK(w) -> \
              s_end[w] = true; \
              printf("redis: the lease of c%d's %e set ends (claim window: %d)\n", \
                     id_cl[w], KMODE(s_k[w]), s_win[w]); \
              gc() }

#define LAPSE(k) \
  :: d_step { qlen > k && !w_lapsed[q[k]] && LAPSE_OK(q[k]) -> w_lapsed[q[k]] = true; \
              printf("redis: presence of the waiter of c%d lapses\n", id_cl[q[k]]); gc() }

#ifdef LATE_TRY
inline late_run(k) {
  if
  :: late_st[k] == 1 -> printf("redis: the held-up try of c%d runs now, its call (or lease) still going\n", k)
  :: late_st[k] == 2 -> printf("redis: the held-up try of c%d runs now, after its call returned without the lock\n", k)
  :: late_st[k] == 3 -> printf("redis: the held-up try of c%d runs now, after its lease ended\n", k)
  fi;
  rw_acquire(late_id[k], late_w[k], OWN(k), late_wait[k], late_fresh[k]);
  late_st[k] = 4; late_id[k] = 0; late_w[k] = false; late_wait[k] = false;
  late_fresh[k] = false;
  hn_ = 0;                             /* nobody gets its reply */
  gc()
}
#define LATE(k) \
  :: d_step { late_st[k] >= 1 && late_st[k] <= 3 -> late_run(k) }
#endif

active proctype Env() {
end_env:
  do
#ifndef NO_LEASE_END
  END(1)
  END(2)
  END(3)
  END(4)
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
#endif
#ifndef NO_EXPIRY
  LAPSE(0)
  LAPSE(1)
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
#endif
#ifdef LATE_TRY
  LATE(0)
  LATE(1)
#if NS > 2
  LATE(2)
#endif
#endif
  :: false
  od
}

init {
  atomic {
#ifdef COVER
    c_code { char *k_ = getenv("LOCKFLEET_COVER"); cover_k = k_ ? atoi(k_) : 0; };
#endif
    i_ = 0;
    do
    :: i_ < NS -> run Client(i_); i_++
    :: else -> break
    od
  }
}

#ifdef LIVENESS
/* (d) under weak fairness, a waiter that does not give up (slot 0) is
   granted: handed the lock and woken, or taking it itself */
ltl live0 { [] (cl_wait[0] -> <> cl_bel[0]) }
#endif
