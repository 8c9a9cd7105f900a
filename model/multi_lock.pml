/*
 * multi_lock.pml: a Promela model of lockfleet's MULTI-LOCK (several fair
 * locks taken all-or-nothing: LockClient::AcquireAllUntil and
 * TryAcquireAll in lockcore/src/multi_lock.cc), with the atomic try
 * (LockCore::TryAllAtOnce) MultiAcquireScript (lockcore/src/scripts.cc,
 * contract in lockcore/src/scripts.h) and, for each lock, the parts of the
 * fair lock's scripts the multi-lock relies on (AcquireFairScript,
 * ReleaseScript, AbandonScript, hand_off). model/README.md ("The
 * multi-lock model") describes what it abstracts and the properties;
 * scripts/model-check.sh runs the ml-* checks.
 *
 * Conventions are those of fair_lock.pml: every Redis script is one d_step
 * (Lua scripts are atomic), each commented with the script and branch it
 * stands for; printf lines give the counter-examples' narratives.
 *
 * Two locks L0 < L1 (canonical order: L0 first). Clients (owner token =
 * client id + 1, all distinct):
 *   M1 (c 0)  multi-lock calls naming {L0, L1}
 *   M2 (c 1)  multi-lock calls naming {L1, L0} (canonical order: L0, L1)
 *   S0 (c 2)  single-lock fair calls on L0
 *   S1 (c 3)  single-lock fair calls on L1
 *   (-DONE_S: only S0 (c 2), each of its calls on either lock)
 * A multi-lock call: first the atomic try (MultiAcquireScript: all or
 * none, never queues); a TryAcquireAll ends there; a waiting call that is
 * refused takes the locks one by one in canonical order (an ordinary fair
 * acquisition each: queue, park, claim a hand-off), holding the earlier
 * while it waits for the later; a give-up abandons the wait and releases
 * what it took, newest first (roll-back). The atomic try's reply may be
 * lost: the retry returns the same grants (the holds are re-entered, HSETNX
 * per hold id), or is refused (a grant of the first try ended meanwhile):
 * then the call gives back each lock's hold of the try (a release of that
 * hold id, as scripts.h asks of the caller) and goes on as refused; or the
 * retry gets no reply either: the same give-back, and the call ends
 * without the locks.
 *
 * Not modelled (covered by fair_lock.pml for one lock): the leases of
 * believed holds (stalls, lost leases, renewals), presence deadlines and
 * lapses, force-unlocks, lost replies of the per-lock scripts, held-up
 * tries, shared owner tokens, fences. Two expiries are modelled: a
 * hand-off's claim window (the way, without lapses, to a free lock with a
 * live waiter queued, which the atomic try must refuse), and the lease of a
 * grant nobody believes it holds (a try's grant whose reply was lost: the
 * way to a retry refused after its first try granted).
 *
 * Compile-time switches (spin -D...):
 *   CHECK_MUTEX         (a) a client that believes it holds L_i (in its
 *                       critical section, or a multi-lock call holding the
 *                       locks it took) is L_i's owner in Redis with its hold
 *                       and nothing pending; at most one such client per lock
 *   CHECK_ALL           (m) all-or-nothing: a multi-lock call that returns
 *                       acquired is owner of both (and, with (a), stays so
 *                       until it releases); one that returns not acquired
 *                       leaves no hold of its own in either lock (after its
 *                       give-back / roll-back), nor does one whose
 *                       MultiLease was released
 *   CHECK_FIFO          (f) every grant that makes a new owner of L_i (the
 *                       fair free branch, a hand-off, the atomic try's
 *                       grant of a free lock) goes to the head of L_i's
 *                       queue when the queue is not empty
 *                       (default: all three)
 *   NO_GIVE_UP          waits never give up (property (d): no invalid end
 *                       state; spin's default check, without -E)
 *   UNANSWERED=0        the atomic try's replies are never lost (default 1:
 *                       lost, the retry answered or not)
 *   NO_TRY_CALLS        multi-lock calls are all waiting calls (default: a
 *                       call may be a TryAcquireAll)
 *   NO_CLAIM_EXPIRY     an unclaimed hand-off never expires
 *   NO_LEASE_END        the lease of a grant nobody believes it holds (a
 *                       try's grant whose reply was lost) never ends
 *   ONE_S               one single-lock client (S0) taking either lock
 *   CROSS_SLOT          a call may name locks in different slots: no atomic
 *                       try, the ordered path at once (a TryAcquireAll:
 *                       one attempt per lock, rolled back at a refusal)
 *   MCALLS=<n>          calls per multi-lock client (default 1)
 *   SCALLS=<n>          calls per single-lock client (default 2)
 *   MUT_NO_ORDER        mutation: M2's ordered path takes the locks in the
 *                       order it named them (L1, then L0): (d) fails
 *   MUT_ATOMIC_BARGES   mutation: the atomic try ignores the queue (grants
 *                       a free lock with a live waiter queued): (f) fails
 *   MUT_ATOMIC_PARTIAL  mutation: the atomic try grants lock by lock and
 *                       stops at the first refusal, keeping the earlier
 *                       grants: (m) fails
 *   MUT_NO_ROLLBACK     mutation: a give-up in the ordered path does not
 *                       release the locks taken: (m) fails
 *   MUT_RETRY_KEEPS_HOLDS mutation: a retry refused after a lost reply
 *                       gives nothing back (the first try's hold in a lock
 *                       whose other lock's grant ended): (m) fails
 *   COVER               reachability probes: with LOCKFLEET_COVER=<k>
 *                       in pan's environment, probe k fails (REACHED(k));
 *                       one build for all probes
 *   NOHIDDEN            scratch variables in the state (as fair_lock.pml)
 */

#ifndef MCALLS
#define MCALLS 1
#endif
#ifndef SCALLS
#define SCALLS 2
#endif
#ifndef UNANSWERED
#define UNANSWERED 1
#endif

#if !defined(CHECK_MUTEX) && !defined(CHECK_ALL) && !defined(CHECK_FIFO)
#define CHECK_MUTEX
#define CHECK_ALL
#define CHECK_FIFO
#endif

#define NL 2                   /* locks L0, L1 (canonical order)          */
#ifdef ONE_S
#define NC 3
#else
#define NC 4
#endif
#define QMAX 3                 /* a lock's waiters: M1, M2, one single-lock
                                  client (asserted)                        */

/* ---------------------------------------------------------------- Redis */
/* Per lock, its KEYS[1..4] (the fence counter is not modelled).           */
typedef Queue {
  byte e[QMAX];                /* KEYS[3] queue: waiter ids = client id + 1
                                  (a client waits for one lock at a time);
                                  the waiters hash (KEYS[4]) holds the same
                                  ids (no presence deadlines: all live)     */
  byte n
};
byte own[NL];                  /* KEYS[1] field owner: client id + 1; 0: no
                                  lock hash (free)                         */
bool pend[NL];                 /* field pending: a hand-off to the owner's
                                  waiter, not claimed yet (count 0)        */
byte hm[NL];                   /* fields h:<hold id>, count = their number:
                                  bit 2c: client c's atomic-try hold id (one
                                  per lock and call), bit 2c+1: the hold id
                                  of its current per-lock fair acquisition */
Queue q[NL];

/* -------------------------------------------------------------- clients */
byte bel[NC];                  /* bit i: the client believes it holds L_i
                                  (its lease of L_i, a multi-lock call's
                                  taken lock or its MultiLease)             */

#define SB(c) (1 << (2 * (c)))          /* the atomic try's hold id      */
#define OB(c) (1 << (2 * (c) + 1))      /* a per-lock acquisition's      */
#define CALL_HOLDS(c) (SB(c) | OB(c))
/* a client's name in the narratives: M1, M2, S0, S1 */
#define NM(c) ((c) < 2 -> 77 : 83)
#define NUM(c) ((c) < 2 -> (c) + 1 : (c) - 2)

#ifdef NOHIDDEN
#define HIDDEN
#else
#define HIDDEN hidden
#endif
HIDDEN byte i_, j_, n_, g_res;

/* Reachability probes: spin -DCOVER, and LOCKFLEET_COVER=<k> in pan's
   environment (read once by init) turn probe k into a failing assertion
   (as in fair_lock.pml): each situation below is reached.
    1 the atomic try grants both locks
    2 the atomic try re-enters a hold of its own (a retry finding its first
      try's grant)
    3 the atomic try refuses a free lock for a waiter queued (pttl -2)
    4 a hand-off is claimed
    5 an abandon passes on a hand-off that reached its waiter
    6 the fair free branch grants the queue's head (a free lock with a
      waiter queued: after a claim window ended)
    7 a give-back after an unanswered retry releases a hold of the try
    8 a multi-lock call parks for L_j while it holds the other lock
    9 a roll-back releases the lock taken
   10 an unclaimed hand-off expires with waiters queued behind it
   11 a retry refused after a lost reply: the give-back releases a hold
      of the first try
   12 the lease of a grant nobody believes it holds ends */
#ifdef COVER
hidden byte cover_k;                   /* not in the state: set once */
#define REACHED(k) assert(cover_k != k)
#else
#define REACHED(k) skip
#endif

#define INQ(l, c) (q[l].e[0] == (c) + 1 || q[l].e[1] == (c) + 1 || q[l].e[2] == (c) + 1)

/* RPUSH (once: HSET waiters returned 1) */
inline q_push(l, c) {
  assert(q[l].n < QMAX);
  q[l].e[q[l].n] = c + 1;
  q[l].n++
}

/* LPOP (and HDEL waiters) */
inline q_pop(l) {
  i_ = 0;
  do
  :: i_ + 1 < q[l].n -> q[l].e[i_] = q[l].e[i_ + 1]; i_++
  :: else -> break
  od;
  q[l].n--;
  q[l].e[q[l].n] = 0;
  i_ = 0
}

/* LREM queue 1 id (and HDEL waiters id) */
inline q_remove(l, c) {
  i_ = 0;
  do
  :: i_ < q[l].n && q[l].e[i_] != c + 1 -> i_++
  :: else -> break
  od;
  if
  :: i_ < q[l].n ->
     do
     :: i_ + 1 < q[l].n -> q[l].e[i_] = q[l].e[i_ + 1]; i_++
     :: else -> break
     od;
     q[l].n--;
     q[l].e[q[l].n] = 0
  :: else -> skip
  fi;
  i_ = 0
}

/* new_grant (prelude): a new owner of the free lock L_l, one hold. (f):
   with waiters queued, only the queue's head may get it. */
inline new_grant(l, c, hb) {
#ifdef CHECK_FIFO
  assert(q[l].n == 0 || q[l].e[0] == c + 1);
#endif
  own[l] = c + 1; pend[l] = false; hm[l] = hb
}

/* hand_off (prelude), after the hash was deleted: the first (live) waiter
   becomes owner, pending, no holds (count 0); nobody waiting: free. */
inline hand_off(l) {
  if
  :: q[l].n > 0 ->
     j_ = q[l].e[0];
#ifdef CHECK_FIFO
     assert(q[l].e[0] == j_);           /* (f): the head, by construction */
#endif
     q_pop(l);
     own[l] = j_; pend[l] = true; hm[l] = 0;
     printf("   hand_off: L%d to the waiter of %c%d (pending: it claims it)\n",
            l, NM(j_ - 1), NUM(j_ - 1));
     j_ = 0
  :: else ->
     own[l] = 0; pend[l] = false; hm[l] = 0;
     printf("   hand_off: nobody waiting, L%d is free\n", l)
  fi
}

/* AcquireFairScript (queue = 1), client c's waiter id on L_l, hold `hb`.
   g_res: 1 granted, 0 refused (queued). */
inline acquire_fair(l, c, hb) {
  if
  :: own[l] == c + 1 && pend[l] ->
     /* branch ours, the claim of our hand-off (the hand-off took us off
        the queue already) */
     assert(hm[l] == 0 && !INQ(l, c));
     hm[l] = hb; pend[l] = false;
     printf("   AcquireFair(L%d, %c%d) branch ours: claims its hand-off\n", l, NM(c), NUM(c));
     REACHED(4);
     g_res = 1
  :: own[l] == c + 1 && !pend[l] ->
     /* branch ours, reentrant: HSETNX hold; leave the queue if queued */
     hm[l] = hm[l] | hb;
     q_remove(l, c);
     printf("   AcquireFair(L%d, %c%d) branch ours: reentrant hold\n", l, NM(c), NUM(c));
     g_res = 1
  :: own[l] == 0 && (q[l].n == 0 || q[l].e[0] == c + 1) ->
     /* branch free: no live waiter ahead of us (we may be the head) */
     new_grant(l, c, hb);
     if
     :: q[l].n > 0 -> q_pop(l); REACHED(6)
     :: else -> skip
     fi;
     printf("   AcquireFair(L%d, %c%d) branch free: granted\n", l, NM(c), NUM(c));
     g_res = 1
  :: else ->
     /* branch queue up (once) */
     if
     :: !INQ(l, c) -> q_push(l, c)
     :: else -> skip
     fi;
     printf("   AcquireFair(L%d, %c%d): refused, in the queue\n", l, NM(c), NUM(c));
     g_res = 0
  fi
}

/* ReleaseScript(owner c, fence of the grant or "", hold `hb`): only a hold
   of the grant, nothing pending; at zero holds DEL + hand off.
   g_res: 1 released, 0 not held. */
inline release_hold(l, c, hb) {
  if
  :: own[l] == c + 1 && !pend[l] && (hm[l] & hb) ->
     hm[l] = hm[l] & ~(hb);
     if
     :: hm[l] == 0 ->
        printf("   Release(L%d, %c%d): holds left 0\n", l, NM(c), NUM(c));
        hand_off(l)
     :: else ->
        printf("   Release(L%d, %c%d): a hold is left\n", l, NM(c), NUM(c))
     fi;
     g_res = 1
  :: else ->
     printf("   Release(L%d, %c%d): not held\n", l, NM(c), NUM(c));
     g_res = 0
  fi
}

/* AbandonScript(c's waiter id on L_l, the call's hold id `hb`): leave the
   queue; a hand-off pending to us is passed on; a hold of ours the lock
   carries is given back. */
inline abandon(l, c, hb) {
  q_remove(l, c);
  if
  :: own[l] == c + 1 && pend[l] ->
     printf("   Abandon(L%d, %c%d): passes on the hand-off that reached it\n", l, NM(c), NUM(c));
     REACHED(5);
     hand_off(l)
  :: own[l] == c + 1 && !pend[l] && (hm[l] & hb) ->
     hm[l] = hm[l] & ~(hb);
     printf("   Abandon(L%d, %c%d): gives back its hold\n", l, NM(c), NUM(c));
     if
     :: hm[l] == 0 -> hand_off(l)
     :: else -> skip
     fi
  :: else ->
     printf("   Abandon(L%d, %c%d): left the queue\n", l, NM(c), NUM(c))
  fi
}

/* MultiAcquireScript (fair = 1): a lock is grantable if free with no live
   waiter queued, or held under our owner token with no hand-off pending. */
#ifdef MUT_ATOMIC_BARGES
#define GRANTABLE(l, c) (own[l] == 0 || (own[l] == (c) + 1 && !pend[l]))
#else
#define GRANTABLE(l, c) ((own[l] == 0 && q[l].n == 0) || (own[l] == (c) + 1 && !pend[l]))
#endif

/* its grant of one lock: a new grant (free), or our hold re-entered
   (HSETNX: a retry finding the first try's hold adds nothing) */
inline multi_grant(l, c) {
  if
  :: own[l] == 0 -> new_grant(l, c, SB(c))
  :: else -> hm[l] = hm[l] | SB(c); REACHED(2)
  fi
}

inline multi_refused(l, c) {
#ifdef MUT_ATOMIC_PARTIAL
#define REFUSED_FREE "   MultiAcquire(%c%d): refused at L%d (free, a waiter queued), earlier grants kept\n"
#define REFUSED_HELD "   MultiAcquire(%c%d): refused at L%d (held by %c%d), earlier grants kept\n"
#else
#define REFUSED_FREE "   MultiAcquire(%c%d): refused at L%d (free, a waiter queued: pttl -2), nothing granted\n"
#define REFUSED_HELD "   MultiAcquire(%c%d): refused at L%d (held by %c%d), nothing granted\n"
#endif
  if
  :: own[l] == 0 ->
     printf(REFUSED_FREE, NM(c), NUM(c), l);
     REACHED(3)
  :: else ->
     printf(REFUSED_HELD, NM(c), NUM(c), l, NM(own[l] - 1), NUM(own[l] - 1))
  fi;
  g_res = 0
}

/* g_res: 1 all granted, 0 refused (nothing granted) */
inline multi_acquire(c) {
#ifndef MUT_ATOMIC_PARTIAL
  /* first every lock is checked, nothing granted */
  if
  :: !GRANTABLE(0, c) -> multi_refused(0, c)
  :: GRANTABLE(0, c) && !GRANTABLE(1, c) -> multi_refused(1, c)
  :: GRANTABLE(0, c) && GRANTABLE(1, c) ->
     /* then every lock is granted, each its own hold */
     multi_grant(0, c); multi_grant(1, c);
     printf("   MultiAcquire(%c%d): granted L0 and L1\n", NM(c), NUM(c));
     g_res = 1
  fi
#else
  /* the mutation: lock by lock, stopping at the first refusal */
  if
  :: GRANTABLE(0, c) ->
     multi_grant(0, c);
     printf("   MultiAcquire(%c%d): granted L0\n", NM(c), NUM(c));
     if
     :: GRANTABLE(1, c) ->
        multi_grant(1, c);
        printf("   MultiAcquire(%c%d): granted L1\n", NM(c), NUM(c));
        g_res = 1
     :: else -> multi_refused(1, c)
     fi
  :: else -> multi_refused(0, c)
  fi
#endif
}

/* ------------------------------------------------------------ properties */
/* (a), after every step that changes Redis or a belief. */
inline inv() {
#ifdef CHECK_MUTEX
  i_ = 0;
  do
  :: i_ < NL ->
     n_ = 0; j_ = 0;
     do
     :: j_ < NC ->
        if
        :: bel[j_] & (1 << i_) ->
           assert(own[i_] == j_ + 1 && !pend[i_] && (hm[i_] & CALL_HOLDS(j_)) != 0);
           n_++
        :: else -> skip
        fi;
        j_++
     :: else -> break
     od;
     assert(n_ <= 1);
     i_++
  :: else -> break
  od;
  i_ = 0; j_ = 0; n_ = 0
#else
  skip
#endif
}

/* (m) a multi-lock call that returns acquired (bel[c] == 3, its lease's
   hold `hb`) */
inline returns_acquired(c, hb) {
#ifdef CHECK_ALL
  assert(own[0] == c + 1 && own[1] == c + 1 && !pend[0] && !pend[1]);
  assert((hm[0] & hb) != 0 && (hm[1] & hb) != 0);
#endif
  skip
}

/* (m) a multi-lock call that returns not acquired, after its give-back or
   roll-back: no hold of the call in either lock. Model soundness for every
   call that ends without its lock: no queue entry, no hand-off pending. */
inline returns_empty(c) {
  assert(bel[c] == 0);
  assert(!INQ(0, c) && !INQ(1, c));
  assert(!(own[0] == c + 1 && pend[0]) && !(own[1] == c + 1 && pend[1]));
#ifdef CHECK_ALL
  if
  :: c < 2 -> assert((hm[0] & CALL_HOLDS(c)) == 0); assert((hm[1] & CALL_HOLDS(c)) == 0)
  :: else -> skip
  fi
#endif
}

/* (m) a multi-lock call's MultiLease released: no hold of the call stays
   in either lock (a hold of the atomic try left beside the ordered path's
   would keep the lock after the release) */
inline released(c) {
#ifdef CHECK_ALL
  assert((hm[0] & CALL_HOLDS(c)) == 0); assert((hm[1] & CALL_HOLDS(c)) == 0)
#else
  skip
#endif
}

/* ------------------------------------------------------------- clients */
/* The parked waiter's next attempt, allowed only when it changes
   something: a hand-off pending to it (the claim), the lock free with it
   at the head or nobody queued, or it is no longer queued (its hand-off's
   claim window ended: it queues again). Any other attempt is refused
   with nothing changed (presence deadlines are not modelled), so leaving
   it out loses no behaviour, and a waiter that can never be granted is
   blocked: a deadlock is an invalid end state. */
#define MAY_ATTEMPT(l, c) (own[l] == (c) + 1 || \
                           (own[l] == 0 && (q[l].n == 0 || q[l].e[0] == (c) + 1)) || \
                           !INQ(l, c))

/* A multi-lock client: MCALLS calls of AcquireAllUntil / TryAcquireAll
   naming (n0, n1). */
proctype Multi(byte c; byte n0; byte n1) {
  byte calls, k, l;
  byte lost;                   /* the atomic try's reply was lost: 1; the
                                  retry's too (no answer): 2               */
  bool tryc, r, viatry;
  bool xslot;                  /* CROSS_SLOT: this call had no atomic try  */

Idle:
  if
  :: calls == MCALLS -> goto Done
  :: else -> skip
  fi;
  calls++;
  if
  :: tryc = false
#ifndef NO_TRY_CALLS
  :: tryc = true
#endif
  fi;
#ifdef CROSS_SLOT
  /* names in different Redis slots (or servers): no atomic try, the
     ordered path at once; a TryAcquireAll gets one attempt per lock */
  if
  :: skip
  :: d_step { xslot = true;
              printf("%c%d: call (TryAcquireAll: %d) naming L%d, L%d: different slots, no atomic try\n",
                     NM(c), NUM(c), tryc, n0, n1) };
     goto Refused
  fi;
#endif

  /* EvalRetryOnce(MultiAcquireScript, owner, lease, fair, per lock its
     hold id and fresh), the locks in canonical order */
  if
  :: d_step { printf("%c%d: call (TryAcquireAll: %d) naming L%d, L%d: the atomic try\n",
                     NM(c), NUM(c), tryc, n0, n1);
              multi_acquire(c); r = g_res;
              if :: r -> bel[c] = 3; REACHED(1); returns_acquired(c, SB(c)) :: else -> skip fi;
              inv() };
     goto Answered
#if UNANSWERED
  :: d_step { printf("%c%d: call (TryAcquireAll: %d) naming L%d, L%d: the atomic try\n",
                     NM(c), NUM(c), tryc, n0, n1);
              multi_acquire(c);
              printf("%c%d: its reply is lost (the script ran); retrying\n", NM(c), NUM(c));
              lost = 1;
              inv() }
  :: d_step { printf("%c%d: call (TryAcquireAll: %d) naming L%d, L%d: the atomic try gets no reply (it did not run); retrying\n",
                     NM(c), NUM(c), tryc, n0, n1);
              lost = 1 }
#endif
  fi;
#if UNANSWERED
  /* the retry (time passes before it) */
  if
  :: d_step { multi_acquire(c); r = g_res;
              printf("%c%d: the retry's reply: %d\n", NM(c), NUM(c), r);
              if :: r -> bel[c] = 3; returns_acquired(c, SB(c)) :: else -> skip fi;
              inv() };
     goto Answered
  :: d_step { multi_acquire(c);
              printf("%c%d: the retry ran, its reply is lost too\n", NM(c), NUM(c));
              lost = 2;
              inv() };
     goto GiveBack
  :: d_step { printf("%c%d: no reply to the retry either (it did not run)\n", NM(c), NUM(c));
              lost = 2 };
     goto GiveBack
  fi;
#endif

Answered:
  if
  :: r -> viatry = true; goto Hold
  :: !r && lost == 0 -> goto Refused
#if UNANSWERED
  :: !r && lost != 0 ->
     /* refused after a lost reply: the first try may have granted some
        locks whose hold another lock lost since (scripts.h: "a retry
        refused ... leaves the first try's holds in the other locks, which
        the caller gives back") */
#ifdef MUT_RETRY_KEEPS_HOLDS
     goto Refused
#else
     goto GiveBack
#endif
#endif
  fi;

#if UNANSWERED
GiveBack:
  /* each lock's hold of the try given back: ReleaseScript(owner, fence
     "", the try's hold id of that lock); then no answer (lost == 2): the
     call ends without the locks; refused: as an answered refusal */
  if
  :: d_step { printf("%c%d: gives back its try's holds (no answer: %d)\n", NM(c), NUM(c), lost == 2);
              release_hold(0, c, SB(c));
              if
              :: g_res && lost == 2 -> REACHED(7)
              :: g_res && lost == 1 -> REACHED(11)
              :: else -> skip
              fi;
              inv() }
  fi;
  d_step { release_hold(1, c, SB(c));
           if
           :: g_res && lost == 2 -> REACHED(7)
           :: g_res && lost == 1 -> REACHED(11)
           :: else -> skip
           fi;
           inv() };
  if
  :: lost == 2 -> goto NotAcquired
  :: else -> skip
  fi;
#endif

Refused:
  if
  :: tryc && !xslot -> goto NotAcquired      /* TryAcquireAll: refused */
  :: else -> skip                             /* the ordered path */
  fi;

  /* each lock in canonical order (MUT_NO_ORDER: as named), an ordinary fair
     acquisition (AcquireUntil), the earlier held while waiting */
  k = 0;
Next:
#ifdef MUT_NO_ORDER
  l = (k == 0 -> n0 : n1);
#else
  l = k;
#endif
  d_step { printf("%c%d: ordered path: acquires L%d\n", NM(c), NUM(c), l);
           acquire_fair(l, c, OB(c)); r = g_res;
           if
           :: r -> bel[c] = bel[c] | (1 << l)
           :: !r && bel[c] != 0 ->
              printf("%c%d: parks, holding L%d\n", NM(c), NUM(c), l ^ 1);
              REACHED(8)
           :: else -> skip
           fi;
           inv() };
  if
  :: r -> goto Taken
  :: else -> skip
  fi;
Park:
  /* parked (bounded; every wake and bound only leads to the next
     attempt), or gives up (deadline, cancel); a cross-slot TryAcquireAll
     (past its deadline from the start) gives up at once */
  if
  :: d_step { !tryc && MAY_ATTEMPT(l, c) ->
              printf("%c%d: attempts L%d again\n", NM(c), NUM(c), l);
              acquire_fair(l, c, OB(c)); r = g_res;
              if :: r -> bel[c] = bel[c] | (1 << l) :: else -> skip fi;
              inv() };
     if
     :: r -> goto Taken
     :: else -> goto Park
     fi
#ifdef NO_GIVE_UP
  :: d_step { tryc ->
#else
  :: d_step {
#endif
              printf("%c%d: gives up waiting for L%d (holding %d)\n", NM(c), NUM(c), l, bel[c]);
              abandon(l, c, OB(c));
              inv() };
     goto Rollback
  fi;

Taken:
  k++;
  if
  :: k < NL -> goto Next
  :: else -> viatry = false
  fi;
  d_step { returns_acquired(c, OB(c)); inv() };
  goto Hold;

Rollback:
  /* give_back(): MultiLease(taken).Release(), newest first (one here) */
  if
  :: k == 1 ->
     d_step { bel[c] = 0;
#ifndef MUT_NO_ROLLBACK
              printf("%c%d: rolls back: releases L%d\n", NM(c), NUM(c), l ^ 1);
              release_hold(l ^ 1, c, OB(c));
              REACHED(9);
#else
              printf("%c%d: returns without releasing L%d (no roll-back)\n", NM(c), NUM(c), l ^ 1);
#endif
              inv() }
  :: else -> skip
  fi;

NotAcquired:
  if
  :: d_step { printf("%c%d: the call returns not acquired\n", NM(c), NUM(c));
              returns_empty(c);
              k = 0; l = 0; lost = 0; r = false; tryc = false; viatry = false; xslot = false }
  fi;
  goto Idle;

Hold:
  /* the critical section over both; MultiLease::Release, newest first */
  if
  :: viatry ->
     d_step { printf("%c%d: holds L0 and L1 (atomic try); releases L1, then L0\n", NM(c), NUM(c));
              bel[c] = bel[c] & ~2; release_hold(1, c, SB(c)); assert(g_res); inv() };
     d_step { bel[c] = 0; release_hold(0, c, SB(c)); assert(g_res); released(c); inv() }
  :: else ->
     d_step { printf("%c%d: holds L0 and L1 (ordered path); releases L%d, then L%d\n",
                     NM(c), NUM(c), l, l ^ 1);
              bel[c] = bel[c] & ~(1 << l); release_hold(l, c, OB(c)); assert(g_res); inv() };
     d_step { bel[c] = 0; release_hold(l ^ 1, c, OB(c)); assert(g_res); released(c); inv() }
  fi;
  d_step { k = 0; l = 0; lost = 0; r = false; tryc = false; viatry = false; xslot = false };
  goto Idle;

Done:
  skip
}

/* A single-lock client: SCALLS fair AcquireUntil calls on lock `lk` (2:
   either). */
proctype Single(byte c; byte lk) {
  byte calls, l;
  bool r;

Idle:
  if
  :: calls == SCALLS -> goto Done
  :: else -> skip
  fi;
  calls++;
  if
  :: lk != 1 -> l = 0
  :: lk != 0 -> l = 1
  fi;
  d_step { printf("%c%d: acquire call on L%d\n", NM(c), NUM(c), l);
           acquire_fair(l, c, OB(c)); r = g_res;
           if :: r -> bel[c] = 1 << l :: else -> skip fi;
           inv() };
  if
  :: r -> goto Hold
  :: else -> skip
  fi;
Park:
  if
  :: d_step { MAY_ATTEMPT(l, c) ->
              printf("%c%d: attempts L%d again\n", NM(c), NUM(c), l);
              acquire_fair(l, c, OB(c)); r = g_res;
              if :: r -> bel[c] = 1 << l :: else -> skip fi;
              inv() };
     if
     :: r -> goto Hold
     :: else -> goto Park
     fi
#ifndef NO_GIVE_UP
  :: d_step { printf("%c%d: gives up waiting for L%d\n", NM(c), NUM(c), l);
              abandon(l, c, OB(c));
              returns_empty(c);
              l = 0; r = false;
              inv() };
     goto Idle
#endif
  fi;

Hold:
  if                                   /* (the label may not be on a d_step) */
  :: d_step { printf("%c%d: holds L%d; releases it\n", NM(c), NUM(c), l);
              bel[c] = 0; release_hold(l, c, OB(c)); assert(g_res);
              l = 0; r = false;
              inv() }
  fi;
  goto Idle;

Done:
  skip
}

/* ------------------------------------------------------- environment */
/* An unclaimed hand-off's claim window may end at any moment (its grantee
   paused, or slow to claim): the key expires, no hand-off; the waiters
   behind stay queued. */
#define BELIEVED(l) ((bel[0] | bel[1] | bel[2] | BEL3) & (1 << (l)))
#ifdef ONE_S
#define BEL3 0
#else
#define BEL3 bel[3]
#endif

active proctype Env() {
end:
  do
#ifndef NO_LEASE_END
  /* The lease of a grant nobody believes it holds may end at any moment
     (a try's grant whose reply was lost: the client's validity, counted
     from before the send, ran out before its retry: a pause, a short
     lease). A believed hold's lease never ends here: fair_lock.pml
     covers stalls, lost leases and renewals. */
  :: d_step { own[0] != 0 && !pend[0] && !BELIEVED(0) ->
              printf("redis: the lease of L0 (%c%d's grant, nobody holding it) ends\n",
                     NM(own[0] - 1), NUM(own[0] - 1));
              own[0] = 0; hm[0] = 0;
              REACHED(12);
              inv() }
  :: d_step { own[1] != 0 && !pend[1] && !BELIEVED(1) ->
              printf("redis: the lease of L1 (%c%d's grant, nobody holding it) ends\n",
                     NM(own[1] - 1), NUM(own[1] - 1));
              own[1] = 0; hm[1] = 0;
              REACHED(12);
              inv() }
#endif
#ifndef NO_CLAIM_EXPIRY
  :: d_step { own[0] != 0 && pend[0] ->
              printf("redis: the hand-off of L0 to %c%d expires unclaimed (claim window)\n",
                     NM(own[0] - 1), NUM(own[0] - 1));
              own[0] = 0; pend[0] = false;
              if :: q[0].n > 0 -> REACHED(10) :: else -> skip fi;
              inv() }
  :: d_step { own[1] != 0 && pend[1] ->
              printf("redis: the hand-off of L1 to %c%d expires unclaimed (claim window)\n",
                     NM(own[1] - 1), NUM(own[1] - 1));
              own[1] = 0; pend[1] = false;
              if :: q[1].n > 0 -> REACHED(10) :: else -> skip fi;
              inv() }
#endif
  od
}

init {
  atomic {
#ifdef COVER
    c_code { char *k_ = getenv("LOCKFLEET_COVER"); cover_k = k_ ? atoi(k_) : 0; };
#endif
    run Multi(0, 0, 1);          /* M1 names L0, L1 */
    run Multi(1, 1, 0);          /* M2 names L1, L0 */
#ifdef ONE_S
    run Single(2, 2);            /* S0: either lock */
#else
    run Single(2, 0);            /* S0: L0 */
    run Single(3, 1);            /* S1: L1 */
#endif
  }
}
