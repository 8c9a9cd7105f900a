/*
 * fair_lock.pml: a Promela model of lockfleet's FAIR lock protocol
 * (lockcore/src/scripts.cc: AcquireFairScript, ReleaseScript, AbandonScript,
 * RenewScript, ForceUnlockScript, PresenceScript; client side:
 * lockcore/src/lock_client.cc, lockcore/src/watchdog.cc). model/README.md
 * describes the model, what it abstracts, the properties and how to run it
 * (scripts/model-check.sh).
 *
 * Every Redis script is one d_step (Lua scripts are atomic on the server).
 * A client step that sends a script either gets its reply, or loses it and
 * retries once (EvalRetryOnce): the first try executed, the retry executes
 * too, and other processes may act in between. An acquire's retry may also
 * get no reply (TryOnce throws): the call may then hold its hold id unseen
 * (may_hold), and gives it back when it ends without the lock
 * (GiveBackLostHolds). Every try of one acquisition call sends the call's
 * one hold id (LockCore::AcquireUntil, since cdf7a39). With min_replicas, a
 * grant whose WAIT fell short throws (redis_replicas) the same way, the
 * call's may_hold set: it is given back when the call ends (replicas
 * themselves are not modelled; the step is the client's).
 *
 * Hand-off in full (since 2026-12-01): a release hands a "g:<hold id>"
 * waiter (a call under its thread's own token, the watchdog's lease, no
 * min_replicas) the lock in full — its hold, count 1, the claim window —
 * and the grantee confirms with one read (HandOffConfirmCommand,
 * LockCore::ConfirmHandOff): see hand_off and confirm.
 *
 * Compile-time switches (spin -D...):
 *   NC=<n>                      clients (default 2)
 *   LIVENESS                    the liveness configuration (properties d,
 *                               f; pick one with pan -N live0 / -N work0)
 *   ATTACKER                    (with LIVENESS) force events replayed or
 *                               forged at will
 *   CHECK_MUTEX / CHECK_FENCE / CHECK_HANDOFF / CHECK_NOFALSE /
 *   CHECK_GIVEBACK              check only that safety property (default: all)
 *   BUG_PHANTOM_QUEUE           bug 7 put back: the "ours" branch of
 *                               AcquireFairScript leaves the caller's waiter
 *                               id in the queue
 *   BUG_FORCE_NOT_IDEMPOTENT    bug 2 put back: ForceUnlockScript deletes
 *                               whatever grant is current
 *   BUG_FORCE_EVENT_REVOKES     bug 1 put back: a force unlock event naming a
 *                               held grant marks it lost on its own
 *   BUG_HOLD_PER_TRY            the client before cdf7a39 put back: a fresh
 *                               hold id per try, a try that threw remembered
 *                               in a bounded orphans_ list (64; here 1, the
 *                               oldest evicted), the give-up giving back
 *                               only what the list still has
 *   LATE_TRY                    a first try may be held up in flight and run
 *                               on the server at any later time, also after
 *                               its call returned (a known limit: see
 *                               model/README.md)
 *   MUT_FENCE_RESET             a mutation (no known bug): the fence counter
 *                               is deleted with the lock hash; shows that
 *                               property (b) is not vacuous
 *   MUT_REQUEUE                 a mutation (no known bug): a waiter's
 *                               presence refresh moves it to the tail of the
 *                               queue; shows that property (d) is not vacuous
 *   COVER                       reachability probes: with LOCKFLEET_COVER=<k>
 *                               in pan's environment, probe k fails
 *                               (REACHED(k)); one build for all probes
 *   TRACE                       no renaming of fences (readable traces;
 *                               the state space is then infinite: use
 *                               only to print a counter-example)
 *   NOHIDDEN                    scratch variables in the state (for BFS)
 *   DISTINCT_OWNERS             every client has its own owner token
 *                               (default: a call may use either of two tokens)
 *   NO_OPERATOR                 no force-unlock
 *   UNANSWERED=<k>              only clients 0..k-1 may get no reply to an
 *                               acquire's retry, or a grant too few replicas
 *                               acknowledged (default: all)
 *   BUG_UNACKED_KEPT            a mutation: a grant too few replicas
 *                               acknowledged throws without setting may_hold
 *                               (nobody gives it back); property (g) fails
 *   NO_ORPHANS                  every give-back is answered (no orphans_
 *                               record)
 *   MUT_ABANDON_KEEPS_HOLD      a mutation: the abandon script does not
 *                               give back the call's hold (before it took
 *                               the hold id; with BUG_UNACKED_KEPT, (g)
 *                               fails)
 *   MUT_FRESH_SHRINKS           a mutation: a "fresh" replacement sets the
 *                               key's TTL to the caller's lease instead of
 *                               max(PTTL, lease); with LATE_TRY and
 *                               DISTINCT_OWNERS, (a) fails
 *   NO_PRESENCE                 no watchdog presence refresh (PresenceScript):
 *                               the model before 40f62d6, each waiter
 *                               attempting at every park bound
 *   MUT_PRESENCE_HEXISTS        40f62d6 put back: PresenceScript refreshes an
 *                               entry that merely exists (HEXISTS), lapsed or
 *                               not: a lapsed head dropped by its live_head is
 *                               written back into the hash alone, a phantom
 *                               entry (the no-phantom invariant fails)
 *   MUT_PRESENCE_FREE           a mutation: PresenceScript refreshes and
 *                               answers {1} also when the lock is free and
 *                               the waiter is the first live one (no {0}):
 *                               with LIVENESS and HOLDER_CRASH, (d) fails
 *   LAPSE_ONCE                  (with LIVENESS) the queue entry of one
 *                               waiting call may lapse, once per run (its
 *                               thread paused past its presence deadline)
 *   HOLDER_CRASH                (with LIVENESS) a client may crash once
 *                               while holding: its hold stays
 *                               until the key expires, which leaves the lock
 *                               free with waiters queued
 *   CHECK_PRIVATE               property (p) only: no other call re-enters a
 *                               grant in full before its grantee confirmed it
 *   FULL_MASK=<m>               clients (bit c) whose calls may be handed the
 *                               lock in full ("g:" waiters; default all);
 *                               0: every hand-off is one to claim (the model
 *                               before the hand-off in full)
 *   CLAIM_MASK=<m>              (with DISTINCT_OWNERS / LIVENESS) clients
 *                               whose calls may be "w:" waiters under their
 *                               own token (an explicit lease, min_replicas;
 *                               default all). With shared tokens the calls
 *                               under tokens 1 and 2 are the "w:" ones.
 *   MUT_CONFIRM_BASE            a mutation: a grantee in full counts its
 *                               validity from the confirming read instead of
 *                               from the last send that found it queued; the
 *                               key (claim window from the hand-off) may then
 *                               expire while it believes: (a) fails
 *   MUT_CONFIRM_OWNER_ONLY      a mutation: the confirming read checks the
 *                               owner only, not the call's h:<hold> field
 *   MUT_INFULL_SHARED           a mutation: calls under the shared token 1 are
 *                               handed the lock in full too; another call
 *                               sharing the token re-enters the grant before
 *                               its grantee confirms: (p) fails
 *   PRESENCE_NO_OWNER           PresenceScript before the {2} answer: {0} for
 *                               a waiter first at a free lock, nothing for a
 *                               lock held under the waiter's owner token
 *   CHECK_WAKE                  property (w) only (it is one of the
 *                               default "all"): a {2} of PresenceScript is
 *                               true when answered (the waiter's attempt
 *                               would be granted then). The safety runs
 *                               then run the script also where it changes
 *                               nothing: at a free lock with the waiter
 *                               first, and at a lock held under the
 *                               waiter's owner token
 *   MUT_PRESENCE_PENDING        a mutation: PresenceScript's owner case does
 *                               not read pending_of: {2} for a lock held
 *                               under the waiter's owner token although a
 *                               hand-off is pending to another waiter (its
 *                               attempt is refused; the next check answers
 *                               {2} again): (w) fails
 *
 * "fresh" (AcquireFairScript ARGV[7]): a client sends 1 when the call uses
 * the thread's own owner token and the client holds nothing of the lock.
 * Each client's token is its own with DISTINCT_OWNERS or LIVENESS, and a
 * client makes one call at a time, so there every try sends 1 (FRESH_TOKENS);
 * with shared tokens (the default) tokens 1 and 2 stand for
 * AcquireOptions::owner (0), and token 3 + c is client c's own token (its
 * thread's DefaultOwner(): 1).
 *
 * Call kinds (LockCore::AcquireUntil's in_full): a call under its thread's
 * own token, with the watchdog's lease and no min_replicas, queues as
 * "g:<hold id>" and is handed the lock in full; any other as "w:<id>" and
 * claims its hand-off. With shared tokens the calls under token 3 + c are
 * in full, those under tokens 1 and 2 to claim; with DISTINCT_OWNERS and
 * LIVENESS a call picks either kind (FULL_MASK, CLAIM_MASK).
 */

#if defined(LIVENESS) || defined(DISTINCT_OWNERS)
#define FRESH_TOKENS
#define OWN_TOKEN(o) (true)
#else
#define OWN_TOKEN(o) ((o) >= 3)
#endif
#ifndef FULL_MASK
#define FULL_MASK 7
#endif
#ifndef CLAIM_MASK
#define CLAIM_MASK 7
#endif
#if FULL_MASK != 0 || defined(MUT_INFULL_SHARED)
#define INFULL_CALLS   /* some call may be in full: the read steps exist
                          (left out otherwise: they are never enabled, and
                          their presence costs partial-order reduction) */
#endif

#ifndef NC
#define NC 2
#endif
#ifndef UNANSWERED
#define UNANSWERED NC
#endif

#if !defined(CHECK_MUTEX) && !defined(CHECK_FENCE) && !defined(CHECK_HANDOFF) && !defined(CHECK_NOFALSE) && !defined(CHECK_GIVEBACK) && !defined(CHECK_PRIVATE) && !defined(CHECK_WAKE)
#define CHECK_MUTEX
#define CHECK_FENCE
#define CHECK_HANDOFF
#define CHECK_NOFALSE
#define CHECK_GIVEBACK
#define CHECK_PRIVATE
#define CHECK_WAKE
#endif

#ifdef LATE_TRY
#define QMAX (NC + NC + 2)     /* queue capacity (model bound, asserted)  */
#else
#define QMAX (NC + 2)
#endif
#define WMAX (QMAX + NC + 1)   /* waiter id values 1..WMAX (0: none)      */

/* ---------------------------------------------------------------- Redis */
/* KEYS[1] lock hash. r_owner == 0: the hash does not exist.              */
byte r_owner;          /* field owner: owner token 1..2 (shared), 3 + c
                          (client c's own; DISTINCT_OWNERS: c + 1)        */
byte r_fence;          /* field fence: token of this grant                */
byte r_pending;        /* waiter id of an unclaimed grant: field pending
                          while count is 0 (the scripts' pending_of; a
                          claim sets count 1 and leaves the field)        */
byte r_holds;          /* fields h:<hold>: bit c = the hold id of client
                          c's current acquisition call (one per call)     */
byte r_orph;           /* bit c = the hold id of client c's orphans_
                          record (a call's hold whose give-back got no
                          answer; given back at the owner's next grant).
                          Its owner token is r_owner. A record whose hold
                          has left the lock (expiry, DEL) is dropped: its
                          later release would change nothing.            */
byte r_stale;          /* hold fields nobody will give back (crash, failed
                          release); count = #bits of r_holds, r_orph +
                          r_stale. Only 0 or not matters (such holds only
                          go with the hash), so more of them count as 1. */
#ifdef BUG_HOLD_PER_TRY
byte r_leak;           /* ghost: bit c = one of the r_stale holds is a hold
                          of client c's call evicted from orphans_        */
#endif
bool r_claim;          /* field claim: the grant was made by a hand-off in
                          full (the claim window it was granted with; in
                          Redis it stays until the hash goes, and so here:
                          a fresh replacement is a new hash)             */
byte r_kept;           /* ghost: the fence of the grant a "fresh"
                          replacement replaced (0: none). The key keeps
                          max(PTTL, lease), so it outlives the validity of
                          a client still on that grant (see VALID_ON).   */
/* KEYS[2] fence counter: never expires (INCR only).                      */
byte r_ctr;
/* KEYS[3] queue (list of waiter ids) and KEYS[4] waiters hash
   (waiter id -> presence deadline | owner).                              */
byte q[QMAX];
byte qlen;
byte w_owner[WMAX + 1];    /* 0: no field for this waiter id              */
bool w_lapsed[WMAX + 1];   /* its presence deadline has passed            */
bool w_full[WMAX + 1];     /* the waiter id is "g:<hold id>" (its call is
                              handed the lock in full), else "w:<id>"     */

/* --------------------------------------------------------------- clients */
byte cl_owner[NC];     /* owner token of the current call / hold          */
byte cl_wid[NC];       /* waiter id of the active acquire call, 0: none   */
byte cl_fence[NC];     /* fence of the grant held (or whose reply is in
                          flight), 0: none                                */
bool cl_valid[NC];     /* ghost: the local validity of that grant (from
                          before the send) has not run out                */
bool cl_bel[NC];       /* believes it holds the lock within validity     */
bool cl_may[NC];       /* may_hold (AcquireUntil): a try of the current
                          call may have granted its hold id unseen. Reset
                          by gc() while neither the call's hold nor an
                          orphans_ record of the client is in the lock
                          (then its give-back would change nothing).     */
byte w_client[WMAX + 1];   /* ghost: which client's call a waiter id is   */
byte cl_full;          /* bit c: client c's current call is in full ("g:");
                          0 while no call goes on                        */
byte cl_kept;          /* bit c: client c's in-full call has a presence
                          record (KeepPresence after a refused attempt that
                          queued it): confirm() has a validity base. Not
                          kept for calls to claim (they never confirm).  */
#ifdef MUT_CONFIRM_BASE
byte cl_unbacked;      /* bit c: the mutation's validity, counted from the
                          confirming read, is not covered by the key's
                          time to live (the claim window from the hand-off,
                          which came before the read); a successful
                          renewal covers it again                       */
#endif
#define IS_FULL(c) ((cl_full >> (c)) & 1)
#define KEPT(c) ((cl_kept >> (c)) & 1)
#ifdef LATE_TRY
byte late_st[NC];      /* client c's held-up first try: 0 none yet; 1 in
                          flight, its call still going (or holding the
                          lock it returned with); 2 in flight, its call
                          returned without the lock; 3 in flight, its
                          call's lease was released; 4 it ran (model
                          bound: one held-up try per client and run, so
                          the phantom queue entries they leave are few) */
byte late_owner[NC];   /* the owner token and waiter id it carries        */
byte late_wid[NC];
#endif

#ifdef LIVENESS
bool cs_done[NC];      /* ghost: the call's work was done while holding  */
#endif
#ifndef NO_PRESENCE
#define WATCHDOG_PRESENCE
#endif
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
byte cl_park[NC];      /* client c's park (AcquireUntil's loop around
                          ParkSpinning, kept = the attempt queued): 0 no
                          check of the watchdog confirmed during this park;
                          1 one was ({1}): at the bound it parks on
                          without an attempt; 2 an in-full call woken by a
                          {0} (kChecked, handed): it reads (confirm), and
                          attempts if the read does not confirm; 3 woken
                          by a {2}, or a call to claim by a {0}: it
                          attempts. 0 while not parked.                  */
byte cl_ttl[NC];       /* the park-on's other limit, ttl_at (the holder's
                          PTTL its last attempt saw, + 1 ms): 0 none (the
                          lock was free: PTTL -2) or not known to have
                          passed; 1 that key still there; 2 that key expired
                          (its TTL only grows: max(PTTL, lease), and a
                          claim's lease exceeds the claim window), so
                          ttl_at has passed: the bound leads to an attempt.
                          A key deleted (DEL) before its TTL ran out: 0.  */
#define TTL_DEL(k) if :: cl_ttl[k] == 1 -> cl_ttl[k] = 0 :: else -> skip fi
#define TTL_END(k) if :: cl_ttl[k] == 1 -> cl_ttl[k] = 2 :: else -> skip fi
#endif
#if defined(LIVENESS) && defined(HOLDER_CRASH)
bool h_crashed;        /* a holder crashed (once per run)                 */
#endif
#if defined(LIVENESS) && defined(LAPSE_ONCE)
bool w_paused;         /* a waiting call's entry lapsed (once per run)    */
#endif

/* -------------------------------------------------------------- operator */
byte op_owner;         /* the grant the operator means to force-unlock    */
byte op_fence;         /* (ghost after the force: its holders are excused
                          from mutual exclusion, the revocation was meant) */

/* scratch for d_steps: not part of the state (spin -DNOHIDDEN keeps them
   in it, which pan's breadth-first search needs for shortest trails) */
#ifdef NOHIDDEN
#define HIDDEN
#else
#define HIDDEN hidden
#endif
HIDDEN byte i_, j_, v_, h_, n_, o_, f_, g_res, g_fence, u_;
HIDDEN byte hk_;   /* acquire_fair(NC, ..): the client whose finished
                      call's hold id the held-up try carries */
HIDDEN byte k_;    /* hand_off: the head's kind */
HIDDEN byte phantom_;  /* gc: waiters-hash entries not in the queue */
HIDDEN byte map_[WMAX + 1], t_owner[WMAX + 1], t_lapsed[WMAX + 1],
            t_client[WMAX + 1], t_full[WMAX + 1];

/* Reachability probes: spin -DCOVER, and LOCKFLEET_COVER=<k> in pan's
   environment (read once by init), turn probe k into a failing assertion,
   so that a check can show the situation is reachable (the properties are
   not passing because the model never gets there). */
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

inline q_push(w) {                     /* RPUSH KEYS[3] wid */
  assert(qlen < QMAX);                 /* model bound */
  q[qlen] = w;
  qlen++
}

inline q_remove(w) {                   /* LREM KEYS[3] 1 wid */
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

inline hdel(w) {                       /* HDEL KEYS[4] wid */
  w_owner[w] = 0;
  w_lapsed[w] = false
}

inline count_holds() {                 /* HGET count (= number of holds) */
  n_ = r_stale;
  i_ = 0;
  do
  :: i_ < NC ->
     if :: (r_holds >> i_) & 1 -> n_++ :: else -> skip fi;
     if :: (r_orph >> i_) & 1 -> n_++ :: else -> skip fi;
     i_++
  :: else -> break
  od
}

/* HSETNX KEYS[1] h:<hold> 1 (count + 1 only if the field is new): c < NC
   adds client c's call's hold id; c == NC a hold id no client has any
   more (a held-up try of a call that is over, LATE_TRY). */
inline add_hold(c) {
  if
  :: c < NC -> r_holds = r_holds | (1 << c)
  :: else -> r_stale = 1               /* (one or more: see r_stale) */
  fi
}

inline del_lock() {                    /* DEL KEYS[1] (or its TTL ran out) */
  r_owner = 0; r_fence = 0; r_pending = 0; r_holds = 0; r_orph = 0;
  r_stale = 0; r_kept = 0; r_claim = false;
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
  TTL_DEL(0);
#if NC > 1
  TTL_DEL(1);
#endif
#if NC > 2
  TTL_DEL(2);
#endif
#endif
#ifdef BUG_HOLD_PER_TRY
  r_leak = 0;
#endif
#ifdef MUT_FENCE_RESET
  r_ctr = 0                            /* mutation: counter inside the hash */
#else
  skip
#endif
}

/* Fence values are renamed, keeping their order, to the smallest values
   that keep apart the tokens still referenced (by Redis, a client or the
   operator). Scripts compare tokens for equality only and (b) for order,
   so the renaming changes no behaviour; it makes the state space finite
   without bounding the number of grants. */
inline fence_used(v) {
  u_ = (r_fence == v || op_fence == v || r_kept == v);
  j_ = 0;
  do
  :: j_ < NC -> u_ = u_ || cl_fence[j_] == v; j_++
  :: else -> break
  od
}

inline compact_fences() {
#ifndef TRACE
  v_ = 1;
  do
  :: v_ > r_ctr -> break
  :: else ->
     fence_used(v_);
     if
     :: u_ -> v_++
     :: else ->
        if :: r_fence > v_ -> r_fence-- :: else -> skip fi;
        if :: op_fence > v_ -> op_fence-- :: else -> skip fi;
        if :: r_kept > v_ -> r_kept-- :: else -> skip fi;
        j_ = 0;
        do
        :: j_ < NC -> if :: cl_fence[j_] > v_ -> cl_fence[j_]-- :: else -> skip fi; j_++
        :: else -> break
        od;
        r_ctr--
     fi
  od
#else
  skip                                 /* traces show the real tokens */
#endif
}

/* INCR KEYS[2]. (b): the new token exceeds every token still in use. */
inline new_fence(f) {
  compact_fences();
  f = r_ctr + 1;
#ifdef CHECK_FENCE
  assert(f > r_fence && f > op_fence);
  j_ = 0;
  do
  :: j_ < NC -> assert(f > cl_fence[j_]); j_++
  :: else -> break
  od;
#endif
  r_ctr = f
}

inline wid_used(v) {
  u_ = (r_pending == v || w_owner[v] != 0);
  j_ = 0;
  do
#ifdef LATE_TRY
  :: j_ < NC -> u_ = u_ || cl_wid[j_] == v || late_wid[j_] == v; j_++
#else
  :: j_ < NC -> u_ = u_ || cl_wid[j_] == v; j_++
#endif
  :: else -> break
  od
}

/* A new waiter id ("w:<client id>:<n>", unique per call): the smallest
   value nothing in Redis or any client refers to any more. */
inline alloc_wid(w) {
  v_ = 1;
  do
  :: v_ <= WMAX ->
     wid_used(v_);
     if :: u_ -> v_++ :: else -> break fi
  :: else -> assert(false)              /* model bound */
  od;
  w = v_
}

/* Waiter ids are renamed to a canonical order (queue, pending grant,
   clients' calls): ids are only compared for equality, so this changes no
   behaviour, and states that differ only in the names of ids are one. */
inline wid_name(x) {
  if
  :: x != 0 && map_[x] == 0 -> n_++; map_[x] = n_
  :: else -> skip
  fi
}

#ifdef LATE_TRY
#define NOT_IN_FLIGHT(k) (late_st[k] != 1)
#else
#define NOT_IN_FLIGHT(k) (true)
#endif

inline gc() {
  compact_fences();
  v_ = 0;
  do
  :: v_ <= WMAX -> map_[v_] = 0; v_++
  :: else -> break
  od;
  n_ = 0;
  i_ = 0;
  do
  :: i_ < qlen -> assert(w_owner[q[i_]] != 0); wid_name(q[i_]); i_++
  :: else -> break
  od;
  wid_name(r_pending);
  i_ = 0;
  do
  :: i_ < NC -> wid_name(cl_wid[i_]); i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NC -> wid_name(late_wid[i_]); i_++
  :: else -> break
  od;
#endif
  v_ = 0;
  do
  :: v_ <= WMAX -> t_owner[v_] = 0; t_lapsed[v_] = 0; t_client[v_] = 0; t_full[v_] = 0; v_++
  :: else -> break
  od;
  phantom_ = 0;
  v_ = 1;
  do
  :: v_ <= WMAX ->
     if
     :: map_[v_] != 0 ->
        t_owner[map_[v_]] = w_owner[v_];
        t_lapsed[map_[v_]] = w_lapsed[v_];
        t_client[map_[v_]] = w_client[v_];
        t_full[map_[v_]] = w_full[v_];
        if :: w_owner[v_] != 0 -> phantom_++ :: else -> skip fi
     :: else -> assert(w_owner[v_] == 0)   /* no entry of a waiter id nothing
                                              refers to (a phantom too) */
     fi;
     v_++
  :: else -> break
  od;
  /* (n) No phantom: every waiters-hash entry is queued (a waiter id in the
     hash but not in the list is never queued again: AcquireFair RPUSHes
     only when its HSET adds the field). With the queue's entries all in
     the hash (asserted above), the hash equals the queue. */
  phantom_ = phantom_ - qlen;
  assert(phantom_ == 0);
  v_ = 1;
  do
  :: v_ <= WMAX ->
     w_owner[v_] = t_owner[v_]; w_lapsed[v_] = t_lapsed[v_];
     w_client[v_] = t_client[v_]; w_full[v_] = t_full[v_]; v_++
  :: else -> break
  od;
  i_ = 0;
  do
  :: i_ < qlen -> q[i_] = map_[q[i_]]; i_++
  :: else -> break
  od;
  r_pending = map_[r_pending];
  i_ = 0;
  do
  :: i_ < NC -> cl_wid[i_] = map_[cl_wid[i_]]; i_++
  :: else -> break
  od;
  /* may_hold matters only while a hold it would give back is in the lock
     (or a held-up try may still add one) */
  i_ = 0;
  do
  :: i_ < NC ->
     if
     :: cl_may[i_] && (((r_holds | r_orph) >> i_) & 1) == 0 && NOT_IN_FLIGHT(i_) ->
        cl_may[i_] = false
     :: else -> skip
     fi;
     i_++
  :: else -> break
  od;
#ifdef LATE_TRY
  i_ = 0;
  do
  :: i_ < NC -> late_wid[i_] = map_[late_wid[i_]]; i_++
  :: else -> break
  od;
#endif
  v_ = 0                               /* a d_step must not end in a loop */
}

/* ------------------------------------------- kFairPrelude (scripts.cc) */
/* live_head: drops waiters at the head whose presence deadline passed;
   returns the first live waiter id (0: none). */
inline live_head(h) {
  h = 0;
  do
  :: qlen == 0 -> break
  :: qlen > 0 && !w_lapsed[q[0]] -> h = q[0]; break
  :: qlen > 0 && w_lapsed[q[0]] -> REACHED(9); hdel(q[0]); q_pop()
  od
}

/* hand_off: the lock is free (hash deleted): grant it to the first live
   waiter (pop_live_head: the lapsed ones before it are dropped), new fence,
   TTL = claim window. A "g:<hold id>" waiter is granted in full: owner =
   its entry's owner, count 1, its hold h:<hold id>, pending = its id (with
   count 1 only "handed off": pending_of is nil, r_pending 0 here) and the
   field claim. A "w:" waiter gets a hand-off to claim: count 0, no hold,
   pending = its id (r_pending). The hold of a g: waiter whose call is over
   (a phantom entry, LATE_TRY) is nobody's (r_stale). */
inline hand_off() {
  live_head(h_);
  if
  :: h_ != 0 ->
#ifdef CHECK_HANDOFF
     /* (c) never hand a grant to a waiter whose call has returned */
     assert(cl_wid[w_client[h_]] == h_);
#endif
     o_ = w_owner[h_];
     k_ = w_full[h_];
     q_pop();
     hdel(h_);
     new_fence(f_);
     r_owner = o_; r_fence = f_; r_holds = 0; r_orph = 0; r_stale = 0;
     if
     :: k_ ->                          /* in full */
        r_pending = 0;
        r_claim = true;
        if
        :: cl_wid[w_client[h_]] == h_ -> r_holds = 1 << w_client[h_]
        :: else -> r_stale = 1
        fi;
        printf("  hand_off: IN FULL to the waiter g: of c%d (that call still waiting: %d), owner %d, fence %d, its hold, TTL claim window\n",
               w_client[h_], cl_wid[w_client[h_]] == h_, o_, f_)
     :: else ->                        /* to claim */
        r_pending = h_;
        printf("  hand_off: to claim, to the waiter w: of c%d (that call still waiting: %d), owner %d, fence %d\n",
               w_client[h_], cl_wid[w_client[h_]] == h_, o_, f_)
     fi
  :: else -> printf("  hand_off: nobody waiting, lock free\n")
  fi
}

/* ------------------------------------------------- AcquireFairScript */
/* ARGV: owner o, hold id (client c's call's; c == NC: nobody's, see
   add_hold), waiter id w, enqueue = 1. Result: g_res (1 granted), g_fence. */
/* AcquireFairScript's grant conditions (also (w) in presence_script):
   branch ours, for owner o and waiter id w; branch free (with r_owner 0),
   h being live_head's answer. */
#define ACQ_OURS(o, w) (r_owner == (o) && (r_pending == 0 || r_pending == (w)))
#define ACQ_FREE(h, w) ((h) == 0 || (h) == (w))
inline acquire_fair(c, o, w) {
  g_res = 0;
  g_fence = 0;
  if
  :: ACQ_OURS(o, w) ->
     /* branch "ours": a reentrant hold, a retry, a later try of the same
        call (one hold id per call), or the claim of our hand-off.
        HSETNX h:<hold> (count +1 only if new); PEXPIRE lease (claim:
        count 1 ends the pending, pending_of) or PEXPIRE max(PTTL, lease)
        — always a write, so a WAIT after it covers it (replication is not
        modelled). The script writes a claim as HSET h:<hold> 1 count 1:
        that is add_hold only because a pending grant carries no hold at all —
        asserted here. The queue head's spin check (SpinClaimScript) is
        this claim alone, for r_owner == o && r_pending == w: a subset of
        this branch, which any waiter may already run at any time. */
     assert(r_pending == 0 || (r_holds == 0 && r_orph == 0 && r_stale == 0));
     /* fresh = 1 (the call's token is its thread's own: OWN_TOKEN) and the
        call's hold id is not in the lock (HEXISTS): a
        hold the client does not have (revived by a rollback, given up on,
        or added by a held-up try) — replaced by a new grant: DEL; INCR
        fence; HSET owner count=1 fence h:<hold>; PEXPIRE max(PTTL, lease).
        The hold id of a finished call (c == NC) is in the lock only as
        that client's orphans_ record. */
     if
     :: OWN_TOKEN(o) && r_pending == 0 &&
        ((c < NC && ((r_holds >> c) & 1) == 0) ||
         (c == NC && ((r_orph >> hk_) & 1) == 0)) ->
#ifdef MUT_FRESH_SHRINKS
        r_kept = 0;                    /* mutation: PEXPIRE lease */
#else
        r_kept = r_fence;
#endif
        new_fence(g_fence);
        r_fence = g_fence; r_holds = 0; r_orph = 0; r_stale = 0;
        r_claim = false;               /* (DEL: a new hash) */
#ifdef BUG_HOLD_PER_TRY
        r_leak = 0;
#endif
        printf("  AcquireFair(owner %d): fresh, a hold it does not have: replaced, fence %d\n", o, r_fence)
     :: else ->
#ifdef CHECK_PRIVATE
        /* (p) a grant in full is re-entered by no call but its grantee's
           before the grantee confirmed it (its call still going with its
           hold in the grant) */
        j_ = 0;
        do
        :: j_ < NC ->
           assert(!(r_claim && j_ != c && ((r_holds >> j_) & 1) && cl_wid[j_] != 0));
           j_++
        :: else -> break
        od;
#endif
        /* a grantee in full re-enters its grant (its read did not take it:
           under a quarter of its validity left, or not read) */
        if
        :: c < NC && r_claim && ((r_holds >> c) & 1) && cl_wid[c] == w -> REACHED(26)
        :: else -> skip
        fi
     fi;
     add_hold(c);
#ifndef BUG_PHANTOM_QUEUE
     /* FIX bug 7: LREM KEYS[3] wid; HDEL KEYS[4] wid — not on a claim: the
        hand-off took the grantee off the queue (the script returns early). */
     assert(r_pending != w || w_owner[w] == 0);
     if
     :: r_pending == 0 && w_owner[w] != 0 -> REACHED(2); q_remove(w); hdel(w)
     :: else -> skip
     fi;
#endif
     if :: r_pending != 0 -> REACHED(1) :: else -> skip fi;  /* a claim */
     r_pending = 0;
     g_res = 1;
     g_fence = r_fence;
     printf("  AcquireFair(owner %d, waiter of c%d) branch ours: granted fence %d\n", o, w_client[w], g_fence)
  :: else ->
     if
     :: r_owner == 0 ->
        live_head(h_);
        if
        :: ACQ_FREE(h_, w) ->
           /* branch "free, nobody live ahead of us": LPOP; HDEL wid;
              INCR fence; HSET owner count=1 fence h:<hold>; PEXPIRE lease */
           if :: h_ != 0 -> q_pop(); hdel(w) :: else -> skip fi;
           new_fence(g_fence);
           r_owner = o; r_fence = g_fence; r_holds = 0; r_orph = 0;
           r_stale = 0; r_pending = 0;
           add_hold(c);
           g_res = 1;
           printf("  AcquireFair(owner %d, waiter of c%d) branch free: granted fence %d\n", o, w_client[w], g_fence)
        :: else -> skip
        fi
     :: else -> skip
     fi;
     if
     :: g_res == 0 ->
        /* branch "queue up (once), refresh our presence deadline":
           HSET KEYS[4] wid "deadline|owner"; RPUSH if the field is new */
        if
        :: w_owner[w] == 0 -> q_push(w)
#ifdef MUT_REQUEUE
        :: else -> q_remove(w); q_push(w)  /* mutation: back to the tail */
#else
        :: else -> skip
#endif
        fi;
        w_owner[w] = o;
        w_lapsed[w] = false;
#ifdef COVER
        u_ = 0;                        /* g: and w: waiters in one queue */
        i_ = 0;
        do
        :: i_ < qlen -> u_ = u_ | (1 << w_full[q[i_]]); i_++
        :: else -> break
        od;
        if :: u_ == 3 -> REACHED(24) :: else -> skip fi;
#endif
        printf("  AcquireFair(owner %d, waiter of c%d, g: %d): refused, in the queue\n", o, w_client[w], w_full[w])
     :: else -> skip
     fi
  fi
}

/* ----------------------------------------------------- ReleaseScript */
/* LockCore::ReleaseHold: ARGV owner o, fence f (f == 0: "" = whichever
   grant carries the hold: the give-back of GiveBackLostHolds), hold id
   (bit c of H: r_holds for a call's hold, r_orph for an orphans_
   record's), claim window. The retry of a lost reply gets the first
   try's reply from the latch (KEYS[5], keyed by the hold id); in the model
   the retry runs the script again, which finds the hold gone and changes
   nothing, so the Redis state is the same. Traces print fence "" as 0. */
inline release_hold(H, c, o, f) {
  if
  :: r_owner == 0 ->                                  /* {0} not held */
     printf("  Release(owner %d, fence %d, hold of c%d): not held\n", o, f, c)
  :: r_owner != 0 && (r_owner != o || (f != 0 && r_fence != f) || r_pending != 0) ->
     printf("  Release(owner %d, fence %d, hold of c%d): not ours\n", o, f, c); /* {-1} */
     REACHED(8)
  :: else ->
     if
     :: ((H >> c) & 1) == 0 ->  /* {0} not in this grant: a retry, or gone */
        printf("  Release(owner %d, fence %d, hold of c%d): that hold is not in the grant\n", o, f, c)
     :: else ->
        H = H & (255 - (1 << c));                      /* HDEL h:<hold> */
        count_holds();                                 /* HINCRBY count -1 */
        printf("  Release(owner %d, fence %d, hold of c%d): holds left %d\n", o, f, c, n_);
        if :: n_ > 0 && r_holds == 0 && r_orph == 0 -> REACHED(10) :: else -> skip fi;
        if
        :: n_ == 0 -> del_lock(); hand_off()           /* DEL; hand_off */
        :: else -> skip                                /* {2, count} */
        fi
     fi
  fi
}

/* Lease::Release: the lease's hold (the call's hold id) and grant. */
inline release_script(c, o, f) {
  release_hold(r_holds, c, o, f)
}

/* ----------------------------------------------------- AbandonScript */
/* ARGV: waiter id w, and the hold id of w's call (bit c of r_holds): a
   grant pending to w is passed on; a grant that carries the call's hold
   (a try whose reply was lost, or a direct grant, not modelled) loses that
   hold: HDEL h:<hold>; HINCRBY count -1; at 0 DEL and hand off. With
   -DMUT_ABANDON_KEEPS_HOLD the hold is left (the script before it took the
   hold id). */
inline abandon_script(w, c) {
  printf("  Abandon(waiter of c%d), a grant is pending to it: %d\n", w_client[w], r_owner != 0 && r_pending == w);
  if                                                   /* LREM; HDEL */
  :: w_owner[w] != 0 -> q_remove(w); hdel(w)
  :: else -> skip
  fi;
  if
  :: r_owner != 0 && r_pending == w ->                 /* pass it on */
     REACHED(4); del_lock(); hand_off()
#ifndef MUT_ABANDON_KEEPS_HOLD
  :: r_owner != 0 && r_pending != w && ((r_holds >> c) & 1) ->
     /* (a grant in full to w: count 1, so pending_of is nil and the branch
        above does not fire; this one gives its hold back) */
     REACHED(17);                                      /* {1}/{2}/{3} */
     r_holds = r_holds & (255 - (1 << c));
     count_holds();
     printf("  Abandon: gave back the call's hold (a grant in full: %d), holds left %d\n", r_claim, n_);
     if :: n_ == 0 && r_claim -> REACHED(23) :: else -> skip fi;
     if :: n_ == 0 -> del_lock(); hand_off() :: else -> skip fi
#endif
  :: else -> skip                                      /* {0} */
  fi
}

/* ------------------------------------------------------- RenewScript */
/* Owner and fence checked; PEXPIRE max(PTTL, lease) (always a write, for
   WAIT). With min_replicas a renewal WAIT says fell short extends no
   validity: validity, abstract here, may run out either way. */
inline renew_script(c) {
  g_res = (r_owner != 0 && r_owner == cl_owner[c] && r_fence == cl_fence[c])
}

/* ------------------------------------------------- ForceUnlockScript */
/* ARGV: the expected owner and fence (read first by the operator). */
inline force_script() {
  if
  :: r_owner == 0 ->                                  /* {0} not locked */
     printf("operator: ForceUnlock(owner %d, fence %d): not locked\n", op_owner, op_fence)
#ifndef BUG_FORCE_NOT_IDEMPOTENT
  :: r_owner != 0 && (r_owner != op_owner || r_fence != op_fence) ->
     /* FIX bug 2: not that grant: no-op */
     REACHED(3);
     printf("operator: ForceUnlock(owner %d, fence %d): another grant, nothing done\n", op_owner, op_fence)
#endif
  :: else ->                                          /* DEL; hand_off */
     printf("operator: ForceUnlock(owner %d, fence %d): deletes the grant of owner %d, fence %d\n",
            op_owner, op_fence, r_owner, r_fence);
     del_lock(); hand_off()
  fi
}

/* ---------------------------------------------------- PresenceScript */
/* The watchdog's refresh of the place of client c's parked fair waiter w
   (ARGV: waiter id, owner o, presence ms), one script of the client's
   pipelined batch (LockCore::RefreshPresence). TIME; HGET KEYS[4] wid: a
   missing or lapsed entry (alive(), deadline < now) answers {0} and
   changes nothing — it never makes an entry and never revives a lapsed one
   (the waiter's own attempt decides). HMGET KEYS[1] owner count pending:
   free, and live_head(now) (which pops lapsed heads first, never our live
   entry) is w: {2} without refreshing (the waiter takes the lock with its
   own attempt); held under the waiter's owner token o with nothing pending
   (pending_of): {2} without refreshing (its attempt re-enters it and
   leaves the queue; -DMUT_PRESENCE_PENDING: pending_of not read).
   (-DPRESENCE_NO_OWNER: the script before, EXISTS
   KEYS[1] and {0} for the first case, nothing for the second.) Else HSET wid "now+presence|o" — the same owner, a later
   deadline, which the untimed model does not represent: the entry was
   live and stays so — and the queue's and hash's TTLs (expire_at_least;
   not modelled) extended: {1}. Result: g_res (0: {0}, 1: {1} refreshed,
   2: {2}). The client: {0} wakes the waiter "maybe handed" (an in-full
   call confirms with its read, then makes its full attempt if the read
   does not confirm); {2} wakes it to make its full attempt. (w): a {2}
   is true when answered (CHECK_WAKE, at the end). */
inline presence_script(c, w, o) {
  g_res = 0;                           /* 0: {0}, 1: {1}, 2: {2} */
#ifdef MUT_PRESENCE_HEXISTS
  if                                   /* 40f62d6: HEXISTS KEYS[4] wid */
  :: w_owner[w] != 0 ->
#else
  if
  :: w_owner[w] != 0 && !w_lapsed[w] ->   /* alive(HGET KEYS[4] wid, now) */
#endif
     h_ = 0;
     n_ = qlen;
     if :: r_owner == 0 -> live_head(h_) :: else -> skip fi;
     if                                /* it dropped lapsed heads */
     :: qlen < n_ ->
        REACHED(19);
        printf("c%d: watchdog: Presence(waiter of c%d): live_head drops %d lapsed head(s)\n", c, w_client[w], n_ - qlen)
     :: else -> skip
     fi;
     if
#ifndef MUT_PRESENCE_FREE
     :: r_owner == 0 && h_ == w ->     /* free, we are first: {2} */
        REACHED(18);
#ifdef PRESENCE_NO_OWNER
        g_res = 0;                     /* (before: {0}) */
#else
        g_res = 2;
#endif
        printf("c%d: watchdog: Presence(waiter of c%d): the lock is free and it is first: {%d}, it attempts\n", c, w_client[w], g_res)
#endif
#ifndef PRESENCE_NO_OWNER
#ifdef MUT_PRESENCE_PENDING
     :: r_owner != 0 && r_owner == o ->  /* mutation: pending_of not read */
#else
     :: r_owner != 0 && r_owner == o && r_pending == 0 ->
#endif
        /* held under its owner token, nothing pending (pending_of nil): a
           call sharing the token has it; its attempt re-enters it: {2} */
        REACHED(25);
        g_res = 2;
        printf("c%d: watchdog: Presence(waiter of c%d): the lock is held under its owner token %d, pending to another waiter: %d: {2}, it attempts\n", c, w_client[w], o, r_pending != 0)
#endif
     :: else ->
        u_ = 0;                        /* (for the trace: still listed?) */
        i_ = 0;
        do
        :: i_ < qlen -> u_ = u_ || q[i_] == w; i_++
        :: else -> break
        od;
        printf("c%d: watchdog: Presence(waiter of c%d): HSET, refreshed (lock free: %d, the entry was in the hash: %d, lapsed: %d, it is listed: %d): {1}\n",
               c, w_client[w], r_owner == 0, w_owner[w] != 0, w_lapsed[w], u_);
        w_owner[w] = o;                /* HSET KEYS[4] wid "deadline|owner" */
        w_lapsed[w] = false;
        g_res = 1
     fi
  :: else ->                           /* missing or lapsed: {0}, untouched */
     if :: w_owner[w] != 0 -> REACHED(20) :: else -> skip fi;
     printf("c%d: watchdog: Presence(waiter of c%d): no live entry: {0}, it attempts\n", c, w_client[w])
  fi;
#ifdef CHECK_WAKE
  /* (w) a {2} is true when answered: the waiter's attempt, run at that
     moment, would be granted by AcquireFairScript — branch ours
     (ACQ_OURS), or branch free (ACQ_FREE; h_ is live_head, computed above
     for a free lock: acquire_fair's live_head would find the same, having
     nothing more to pop). A {2} that is not wakes the waiter into a
     refused attempt, and the next check answers {2} again while the state
     stays: a wake -> refuse loop of round trips. */
  assert(g_res != 2 || ACQ_OURS(o, w) || (r_owner == 0 && ACQ_FREE(h_, w)))
#else
  skip
#endif
}

/* ------------------------------------------------------- client side */
#define EXCUSED(k) (op_fence != 0 && cl_fence[k] == op_fence)

/* (a) at the moment client c starts to believe it holds: every other
   believer holds the same grant (same owner token and fence), unless the
   operator meant to revoke one of the two grants. */
inline check_mutex(c) {
#ifdef CHECK_MUTEX
  j_ = 0;
  do
  :: j_ < NC ->
     assert(j_ == c || !cl_bel[j_] || EXCUSED(j_) || EXCUSED(c) ||
            (cl_owner[j_] == cl_owner[c] && cl_fence[j_] == cl_fence[c]));
     if                                  /* a grant shared by two clients */
     :: j_ != c && cl_bel[j_] && cl_fence[j_] == cl_fence[c] -> REACHED(5)
     :: else -> skip
     fi;
     j_++
  :: else -> break
  od
#else
  skip
#endif
}

/* The client marks its hold lost on an answer (renew returned 0) or,
   bug 1, on an event. (e): only if Redis no longer has it. */
inline revoke(c) {
#ifdef CHECK_NOFALSE
  assert(!(r_owner != 0 && r_owner == cl_owner[c] && r_fence == cl_fence[c]));
#endif
  printf("c%d: marks its hold (owner %d, fence %d) LOST\n", c, cl_owner[c], cl_fence[c]);
  cl_bel[c] = false;
  cl_valid[c] = false
}

/* (g) a call that returns without the lock leaves no hold of its own in
   the lock, unless its give-back got no answer (then the hold is its
   orphans_ record, r_orph: give_back_unanswered). Asserted where the call
   returns (end_call) and, with LATE_TRY, where a held-up try of such a
   call runs (late_run). */
#ifdef BUG_HOLD_PER_TRY
#define OWN_HOLD(c) (((r_holds >> c) & 1) || ((r_leak >> c) & 1))
#else
#define OWN_HOLD(c) ((r_holds >> c) & 1)
#endif
inline check_giveback(c) {
#ifdef CHECK_GIVEBACK
  assert(!OWN_HOLD(c));
#else
  skip
#endif
}

/* TryOnce, after a granted reply: ReleaseOrphans(name, owner, fence, the
   owner's orphans_ records of this fence or fence 0): ReleaseHold(owner,
   fence, hold id); the record (name, owner) is erased. The hold just
   granted keeps the count above 0. Modelled atomic with the reply, and
   answered. */
inline release_orphans(c) {
  if
  :: (r_orph >> c) & 1 ->               /* r_owner is the record's owner */
     printf("c%d: TryOnce: ReleaseOrphans(fence %d): the hold of its orphans_ record\n", c, g_fence);
     REACHED(15);
     release_hold(r_orph, c, cl_owner[c], g_fence)
  :: else -> skip
  fi
}

/* TryOnce: the attempt's reply (the last try's) reaches the client. */
inline take_reply(c, got) {
  if
  :: g_res ->
     cl_fence[c] = g_fence;
     cl_wid[c] = 0;                       /* the call returns: granted */
     cl_may[c] = false;                   /* (no give-back) */
     cl_full = cl_full & (255 - (1 << c));
     cl_kept = cl_kept & (255 - (1 << c));
     cl_bel[c] = cl_valid[c];             /* lost at once if validity ran
                                             out before the reply came */
     printf("c%d: reply: granted, fence %d, holds it: %d\n", c, g_fence, cl_bel[c]);
     if :: cl_bel[c] -> check_mutex(c) :: else -> skip fi;
     release_orphans(c);
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
     cl_ttl[c] = 0;
#endif
     got = 1
  :: else ->
     cl_fence[c] = 0;
     cl_valid[c] = false;
     /* refused, queued: KeepPresence(attempt_sent), the base of an
        in-full call's confirm */
     if :: IS_FULL(c) -> cl_kept = cl_kept | (1 << c) :: else -> skip fi;
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
     cl_ttl[c] = (r_owner != 0);          /* the refusal's PTTL: >= 0 */
#endif
     got = 0
  fi;
  gc()
}

/* ConfirmHandOff: an in-full call's read, HMGET owner fence h:<hold>
   claim (no script; read-only). Granted iff the owner is the call's and
   its hold's field is there (-DMUT_CONFIRM_OWNER_ONLY: the owner only);
   the fence read is its token. Only with a validity base (KEPT: the
   presence record of a refused attempt that queued it; confirm() returns
   nullopt without one). Its validity runs from the base — the last send
   that found the waiter still queued: its refused attempt, or a presence
   check that answered {1} — for min(claim, lease). The grant came after
   that send (the hand-off pops the waiter; a send that found it queued ran
   before), with the claim window to live (or, the call's own try, its
   lease), so the key outlives that validity: as for every grant here,
   cl_valid (which may run out at any moment) keeps the key from expiring.
   With under a quarter of that validity left, the client does not take
   the grant but makes its full attempt (Refused -> Attempt, always
   enabled). -DMUT_CONFIRM_BASE: validity counted from the read, which
   came after the hand-off: not covered by the key (cl_unbacked). */
#ifdef MUT_CONFIRM_OWNER_ONLY
#define CONFIRM_READ(c) (r_owner != 0 && r_owner == cl_owner[c])
#else
#define CONFIRM_READ(c) (r_owner != 0 && r_owner == cl_owner[c] && ((r_holds >> (c)) & 1))
#endif
#define CONFIRM_OK(c) (IS_FULL(c) && KEPT(c) && CONFIRM_READ(c))
inline confirm(c) {
  REACHED(21);
  g_fence = r_fence;
  printf("c%d: confirm: HMGET owner, fence, h:<hold>, claim -> owner %d, fence %d, its hold: %d, claim: %d; granted in full, holds it\n",
         c, r_owner, r_fence, (r_holds >> c) & 1, r_claim);
  cl_fence[c] = r_fence;
  cl_wid[c] = 0;                         /* the call returns: granted */
  cl_may[c] = false;
  cl_full = cl_full & (255 - (1 << c));
  cl_kept = cl_kept & (255 - (1 << c));
  cl_valid[c] = true;                    /* from the base: still running */
  cl_bel[c] = true;
#ifdef MUT_CONFIRM_BASE
  cl_unbacked = cl_unbacked | (1 << c);  /* from the read */
  printf("c%d: (the mutation: its validity counted from this read, after the hand-off)\n", c);
#endif
  check_mutex(c);
  release_orphans(c);                    /* Granted: ReleaseOrphans */
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
  cl_ttl[c] = 0;
#endif
  gc()
}

/* EvalRetryOnce: the first try's reply is lost (broken connection,
   timeout): *may_have_run = true, so the call's may_hold. The client only
   remembers the fence of a grant it may have got (the ghost that keeps the
   key from expiring before the client's validity ends). */
inline note_lost_reply(c) {
  cl_may[c] = true;
  if :: g_res -> cl_fence[c] = g_fence :: else -> cl_fence[c] = 0 fi;
  gc()
}

#ifdef BUG_HOLD_PER_TRY
/* The client before cdf7a39, TryOnce's catch: RememberOrphan(name, owner,
   0, this try's hold id). Its list per (name, owner) is bounded (64, the
   oldest evicted; here 1): a second record of the owner evicts the first,
   whose hold, if the lock still carries it, nobody will give back. */
inline remember_orphan(c) {
  if
  :: (r_orph >> c) & 1 && r_owner == cl_owner[c] ->
     printf("c%d: RememberOrphan: the list is full, the oldest record is evicted (its hold is in the lock)\n", c);
     r_orph = r_orph & (255 - (1 << c));
     r_stale = 1;
     r_leak = r_leak | (1 << c)
  :: else -> skip
  fi;
  if
  :: (r_holds >> c) & 1 ->                /* this try's hold id: recorded */
     r_holds = r_holds & (255 - (1 << c));
     r_orph = r_orph | (1 << c)
  :: else -> skip
  fi
}
#endif

/* TryOnce with min_replicas: the script ran and granted (or the claim of
   a hand-off), but its WAIT counted fewer replicas: not a grant. TryOnce
   sets may_hold and throws kRedisReplicas, which is not an outage: the
   call ends (Leave: abandon, then the give-back). A refused try's WAIT
   shortfall is only counted (take_reply). */
inline replicas_short(c, got) {
  if
  :: g_res ->
     REACHED(16);
     printf("c%d: reply: granted, fence %d, but fewer replicas acknowledged: TryOnce throws redis_replicas\n", c, g_fence);
#ifndef BUG_UNACKED_KEPT
     cl_may[c] = true;
#endif
     cl_fence[c] = 0;
     cl_valid[c] = false;
     gc();
     got = 2
  :: else -> take_reply(c, got)
  fi
}

/* The retry gets no reply either (refused with LOADING / OOM, timed out
   or broken again, or past the deadline): EvalRetryOnce throws and so does
   TryOnce; AcquireUntil rides the outage out (attempts again, same hold
   id) or returns / throws without the lock (Leave: give-back). Whether
   the retry ran is not modelled separately: a run that loses its reply is
   the next attempt's try. */
inline try_failed(c) {
  printf("c%d: no reply to the retry either: TryOnce throws (may hold: %d)\n", c, cl_may[c]);
  cl_fence[c] = 0;
  cl_valid[c] = false;
#ifdef BUG_HOLD_PER_TRY
  remember_orphan(c);
#endif
  gc()
}


inline start_attempt(c) {
#ifdef BUG_HOLD_PER_TRY
  assert(((r_holds >> c) & 1) == 0);     /* a new hold id per try (model check) */
#else
  /* the call's hold id is in the lock already: a try of an earlier
     attempt ran unseen; this one is the same hold (HSETNX) */
  if :: (r_holds >> c) & 1 -> REACHED(13) :: else -> skip fi;
#endif
  cl_valid[c] = true;                    /* validity counts from the send */
  cl_fence[c] = 0
}

#ifdef LATE_TRY
/* The call (or the lease it returned with) is over while its held-up try
   is still in flight: from now on that try carries a hold id nobody has.
   A hold id a held-up try put back into a newer grant after the lease's
   release is nobody's either. */
inline late_over(c, st) {
  if :: late_st[c] == 1 -> late_st[c] = st :: else -> skip fi;
  if
  :: (r_holds >> c) & 1 -> r_holds = r_holds & (255 - (1 << c)); r_stale = 1
  :: else -> skip
  fi
}
#endif

inline end_hold(c) {
#ifdef LATE_TRY
  late_over(c, 3);
#endif
  cl_bel[c] = false;
  cl_valid[c] = false;
  cl_fence[c] = 0;
  cl_owner[c] = 0;
#ifdef MUT_CONFIRM_BASE
  cl_unbacked = cl_unbacked & (255 - (1 << c));
#endif
  gc()
}

/* A new call under owner token o, in full (f: waiter id "g:<hold id>") or
   to claim ("w:<id>"). */
inline new_call(c, o, f) {
#ifdef LIVENESS
  cs_done[c] = false;
#endif
  assert(((r_holds >> c) & 1) == 0);     /* a new hold id (model check) */
  cl_owner[c] = o;
  cl_may[c] = false;
  alloc_wid(v_);
  w_client[v_] = c;
  w_full[v_] = f;
  cl_wid[c] = v_;
  if
  :: f -> cl_full = cl_full | (1 << c)
  :: else -> cl_full = cl_full & (255 - (1 << c))
  fi;
  cl_kept = cl_kept & (255 - (1 << c));
  printf("c%d: acquire call (new waiter id, new hold id), owner %d, in full (g:): %d\n", c, o, f);
  gc()
}

inline end_call(c) {                     /* the call returns: not granted */
  check_giveback(c);
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
  cl_ttl[c] = 0;
#endif
#ifdef LATE_TRY
  late_over(c, 2);
#endif
  cl_wid[c] = 0;
  cl_owner[c] = 0;
  cl_may[c] = false;
  cl_full = cl_full & (255 - (1 << c));
  cl_kept = cl_kept & (255 - (1 << c));
#ifdef BUG_HOLD_PER_TRY
  r_leak = r_leak & (255 - (1 << c));
#endif
  gc()
}

/* LockCore::GiveBackLostHolds(name, owner, hold id): ReleaseOrphans(name,
   owner, fence 0, [the call's hold id, the owner's fence-0 orphans_
   records], now + kGiveUpBudget): ReleaseHold(owner, fence "", hold id)
   each, in that order. Answered: */
inline give_back(c) {
#ifdef BUG_HOLD_PER_TRY
  printf("c%d: GiveBackLostHolds: the owner's fence-0 orphans_ records\n", c);
#else
  printf("c%d: GiveBackLostHolds: release by the call's hold id (fence \"\")\n", c);
#endif
#ifdef BUG_HOLD_PER_TRY
  /* the old Leave: GiveBackLostHolds(name, owner) gave back the owner's
     fence-0 records only; the tries' hold ids were those records */
#else
  if :: (r_holds >> c) & 1 -> REACHED(14) :: else -> skip fi;
  release_hold(r_holds, c, cl_owner[c], 0);
#endif
  if
  :: (r_orph >> c) & 1 && r_owner == cl_owner[c] ->
     release_hold(r_orph, c, cl_owner[c], 0)
  :: else -> skip
  fi
}

/* ... not answered within kGiveUpBudget (ReleaseOrphans: the rest are put
   back with fence 0): the call's hold id becomes its orphans_ record, for
   the owner's next grant in this client (release_orphans) or the next
   give-back of a call of that owner. Model bound: one record per client
   (enabled only without one). Whether the release ran is not modelled
   separately (then the hold is gone and the record's later release finds
   nothing). */
inline give_back_unanswered(c) {
  printf("c%d: GiveBackLostHolds: no answer; the hold id goes to orphans_\n", c);
  if
  :: (r_holds >> c) & 1 ->
     r_holds = r_holds & (255 - (1 << c));
     r_orph = r_orph | (1 << c)
  :: else -> skip
  fi
}

/* One client thread making fair acquire calls one after the other
   (LockCore::AcquireUntil with wait = true), holding, releasing. Its owner
   token is cl_owner[c], the waiter id of its call cl_wid[c], the hold id
   of its call bit c of r_holds. */
proctype Client(byte c) {
  byte got;   /* 2: a grant too few replicas acknowledged (replicas_short) */

Idle:
  /* AcquireUntil (fair): an owner token, a new waiter id and a new hold id
     for this call (every try of the call sends both) */
#if defined(LIVENESS) || defined(DISTINCT_OWNERS)
  if                                     /* (the label may not be on a d_step) */
  :: d_step { (CLAIM_MASK >> c) & 1;     /* distinct owner tokens: an */
              new_call(c, c + 1, 0) }    /* explicit lease, min_replicas */
  :: d_step { (FULL_MASK >> c) & 1;      /* the watchdog's lease: */
              new_call(c, c + 1, 1) }    /* in full */
  fi;
#else
#ifdef MUT_INFULL_SHARED
#define SHARED_FULL 1
#else
#define SHARED_FULL 0
#endif
  if                                     /* either of two tokens: clients */
  :: d_step { new_call(c, 1, SHARED_FULL) } /* may share one */
  :: d_step { new_call(c, 2, 0) }        /* (AcquireOptions::owner): to claim */
  :: d_step { (FULL_MASK >> c) & 1;      /* the thread's own token: */
              new_call(c, c + 3, 1) }    /* in full */
  fi;
#endif

Attempt:
  /* TryOnce: EvalRetryOnce(AcquireFairScript, owner, the call's hold id,
     waiter id, enqueue = 1) */
  if
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              acquire_fair(c, cl_owner[c], cl_wid[c]); take_reply(c, got) };
     goto Answered
#ifdef LIVENESS
  :: d_step { c != 0 && !IS_FULL(c);     /* min_replicas: never in full */
#else
  :: d_step { c < UNANSWERED && !IS_FULL(c);
#endif
              start_attempt(c); printf("c%d: attempt (WAIT after it)\n", c);
              acquire_fair(c, cl_owner[c], cl_wid[c]);
              replicas_short(c, got) };
     if :: got == 2 -> got = 0; goto GiveUp :: else -> goto Answered fi
  :: d_step { start_attempt(c); printf("c%d: attempt\n", c);
              acquire_fair(c, cl_owner[c], cl_wid[c]);
              printf("c%d: reply lost (the script ran); retrying\n", c);
              note_lost_reply(c) }
#ifdef LATE_TRY
  :: d_step { late_st[c] == 0;
              start_attempt(c);
              printf("c%d: attempt; the try is held up on the way (timed out, not run yet); retrying\n", c);
              late_st[c] = 1; late_owner[c] = cl_owner[c]; late_wid[c] = cl_wid[c];
              g_res = 0; note_lost_reply(c) }
#endif
  fi;
  /* the reply is lost; time passes before the retry */
  if
  :: skip
#ifdef LIVENESS
  :: d_step { c != 0; try_failed(c) }; goto GiveUp    /* client 0's
        tries are always answered; another's unanswered try ends its call
        (an outage is bounded: outage_grace), so no call rides out an
        outage for ever */
#else
  :: d_step { cl_valid[c] = false;     /* validity (from the send) ran out */
              printf("c%d: validity ran out before the retry\n", c) }
  :: d_step { c < UNANSWERED; try_failed(c) }; goto Refused
#endif
  fi;
  d_step { acquire_fair(c, cl_owner[c], cl_wid[c]); take_reply(c, got) };
Answered:
  if
  :: got && cl_bel[c] -> got = 0; goto Hold
  :: got && !cl_bel[c] -> REACHED(12); got = 0; goto Lost
  :: else -> skip
  fi;
Refused:
  /* Refused, or TryOnce threw (an outage: backed off). Parked on the
     local wait slot, at most presence_window / 3. A wake-up (local
     release, an unlock event: lost, late, duplicated or forged alike) or
     the park bound only leads to the next attempt, which the model allows
     at any time anyway. */
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
  /* Queued (kept): the watchdog checks for us (PresenceScript), and every
     unlock event may be lost. At the bound we park on without an attempt
     if a check was confirmed ({1}) during this park; a {0} wakes us
     (kChecked): we attempt. The watchdog's refresh is this client's step
     here (it refreshes only parked waiters; one in flight when the waiter
     moves on changes at most what live_head drops, and its answer is about
     a state the waiter's own attempt has seen since). A missing entry
     answers {0} and changes nothing: then the bound's attempt (nothing
     confirmed) is the same step. One check per park: the bound comes
     between two confirmed checks (as in time it does), or a process could
     take refresh steps for ever instead of its bound under weak fairness;
     a {0} that comes later than it could changes nothing for (d). The
     bound leads to an attempt past ttl_at (cl_ttl: the key the last
     attempt saw has expired). A {0} wakes the waiter "maybe handed": an
     in-full call reads (confirm), and attempts if the read does not
     confirm; a call to claim attempts (confirm() is nullopt), as after a
     {2}. For an in-full call the {0} of a missing entry is kept (its
     reaction, the read, is not the bound's). */
  if
  :: d_step { cl_park[c] != 1 || cl_ttl[c] == 2;  /* woken, or the bound */
              cl_park[c] = 0 };                   /* with nothing confirmed */
     goto Attempt                                 /* or past ttl_at */
#ifdef INFULL_CALLS
  :: d_step { cl_park[c] == 2 && CONFIRM_OK(c);   /* woken by {0}: the read */
              cl_park[c] = 0; confirm(c) };       /* confirms a grant in full */
     goto Hold
#endif
  :: d_step { cl_park[c] == 1 && cl_ttl[c] != 2;  /* the bound: parks on */
              cl_park[c] = 0;
              printf("c%d: park bound: the watchdog confirmed a check: parks on\n", c) };
     goto Refused
  :: d_step { cl_park[c] == 0 && (w_owner[cl_wid[c]] != 0 || IS_FULL(c));
              presence_script(c, cl_wid[c], cl_owner[c]);
              if
              :: g_res == 1 -> cl_park[c] = 1
              :: g_res == 0 && IS_FULL(c) -> cl_park[c] = 2  /* maybe handed */
              :: else -> cl_park[c] = 3                     /* attempt */
              fi;
              gc() };
     goto Refused
  :: d_step { c != 0; cl_park[c] = 0 }; goto GiveUp   /* client 0 never gives up */
  fi;
#else
  /* An in-full call's read (ConfirmHandOff), at any moment while parked:
     after a wake naming it as a hand-off's grantee (event or local), after
     the watchdog's {0}, or as the queue head's spin check. Enabled where it
     confirms (a read that does not changes nothing: the full attempt, or
     the park going on, follows; COVER: probe 22). */
  if
  :: goto Attempt
#ifdef INFULL_CALLS
  :: d_step { CONFIRM_OK(c) -> confirm(c) }; goto Hold
#endif
#ifdef COVER
  :: d_step { IS_FULL(c) && KEPT(c) && !CONFIRM_READ(c) ->
              printf("c%d: confirm: the read does not confirm (owner %d): the full attempt\n", c, r_owner);
              REACHED(22) };
     goto Attempt
#endif
#ifdef LIVENESS
  :: c != 0 -> goto GiveUp               /* client 0 never gives up */
#else
  :: goto GiveUp                         /* timed out, cancelled, or the
                                            outage outlasted outage_grace */
#endif
  fi;
#endif

GiveUp:
  /* AcquireUntil's Leave (destructor), the call returns without the lock:
     LockCore::Abandon = EvalRetryOnce(AbandonScript); then, if may_hold or
     the abandon got no answer, GiveBackLostHolds (got: it is still to do).
     An abandon without an answer is modelled as not run, its queue entry
     lapsing at once (a hand-off to it before it lapses is the known limit
     of late-queue, bounded by presence + claim window). */
  if
  :: d_step { printf("c%d: gives up\n", c);
              abandon_script(cl_wid[c], c);
              got = cl_may[c];
              if :: !got -> end_call(c) :: else -> skip fi }
  :: d_step { printf("c%d: gives up\n", c);
              abandon_script(cl_wid[c], c);
              printf("c%d: reply lost (the script ran); retrying\n", c) };
     d_step { abandon_script(cl_wid[c], c);
              got = cl_may[c];
              if :: !got -> end_call(c) :: else -> skip fi }
#ifndef LIVENESS
  :: d_step { printf("c%d: gives up; its abandon gets no answer\n", c);
              if
              :: w_owner[cl_wid[c]] != 0 -> q_remove(cl_wid[c]); hdel(cl_wid[c])
              :: else -> skip
              fi;
              got = 1 }
#endif
  fi;
  if
  :: d_step { got; got = 0; give_back(c); end_call(c) }
#if !defined(LIVENESS) && !defined(LATE_TRY) && !defined(NO_ORPHANS)
  :: d_step { got && ((r_orph >> c) & 1) == 0; got = 0;
              give_back_unanswered(c); end_call(c) }
#endif
  :: else
  fi;
  goto Idle;

Hold:
  /* Holding within validity. */
#ifdef LIVENESS
  /* Renewals always succeed here and change nothing in the abstract
     state; validity does not run out for a live holder. Only a force
     event (Attacker) can end the hold before the work is done. */
  if
  :: d_step { cl_bel[c]; cs_done[c] = true };   /* the work is done */
     goto Release
  :: !cl_bel[c] -> goto Lost                     /* lost(): work abandoned */
#ifdef HOLDER_CRASH
  :: d_step {                                    /* once per run (c0 too): */
       cl_bel[c] && !h_crashed;                  /* the process crashes, */
       h_crashed = true;                         /* its hold stays until */
       printf("c%d: crashes while holding (hold stays)\n", c);  /* the key expires */
       r_holds = r_holds & (255 - (1 << c));
       r_stale = 1;
       end_hold(c)
     };
     goto Idle
#endif
  fi;
#else
  if
  :: /* watchdog renewal: RenewScript (owner + fence), 0 = not ours. Fix of
        bug 1: a force unlock event naming our grant only triggers this
        renewal at once, so it is this same step. */
     d_step {
       renew_script(c);
       printf("c%d: Renew(owner %d, fence %d) = %d\n", c, cl_owner[c], cl_fence[c], g_res);
#ifdef MUT_CONFIRM_BASE
       if :: g_res -> cl_unbacked = cl_unbacked & (255 - (1 << c)) :: else -> skip fi;
#endif
       if :: !g_res -> REACHED(6); revoke(c) :: else -> skip fi
     };
     if :: cl_bel[c] -> goto Hold :: else -> goto Lost fi
#ifdef BUG_FORCE_EVENT_REVOKES
  :: /* bug 1: an unlock event with cause force naming our owner and fence
        (sent by a force-unlock, replayed or forged) marks the hold lost
        (MarkLostIfHeld in DeliverUnlockEvent) and stops its renewal */
     d_step {
       printf("c%d: unlock event, cause force, naming owner %d fence %d\n", c, cl_owner[c], cl_fence[c]);
       revoke(c)
     };
     goto Lost
#endif
  :: /* the validity ran out (no renewal in time: Redis slow, a pause) */
     d_step {
       printf("c%d: validity of fence %d ran out\n", c, cl_fence[c]);
       cl_bel[c] = false; cl_valid[c] = false
     };
     goto Lost
  :: goto Release                        /* the work is done */
  fi;
#endif

Lost:
  /* lost() is true: the application stops using the lock. The Lease is
     still given back (its destructor), or the process crashed / the
     release failed: then the hold field stays until the key expires
     (a failed release's orphans_ record, fence = the grant's, is not
     modelled: it only matters if the same grant is re-entered). */
  if
  :: goto Release
#ifndef LIVENESS
  :: d_step {
       r_stale == 0;                     /* model bound: one such hold */
       printf("c%d: crashes or fails to release (hold stays)\n", c);
       if
       :: (r_holds >> c) & 1 ->
          r_holds = r_holds & (255 - (1 << c));
          r_stale = 1
       :: else -> skip
       fi;
       end_hold(c)
     };
     goto Idle
#endif
  fi;

Release:
  /* Lease::Release: the watchdog drops the hold, then
     ReleaseHold = EvalRetryOnce(ReleaseScript, owner, fence, hold id) */
  if
  :: d_step { cl_bel[c] = false; cl_valid[c] = false;
              printf("c%d: releases\n", c);
              release_script(c, cl_owner[c], cl_fence[c]); end_hold(c) }
  :: d_step { cl_bel[c] = false; cl_valid[c] = false;
              printf("c%d: releases\n", c);
              release_script(c, cl_owner[c], cl_fence[c]);
              printf("c%d: reply lost (the script ran); retrying\n", c) };
     d_step { release_script(c, cl_owner[c], cl_fence[c]); end_hold(c) }
  fi;
  goto Idle
}

/* ------------------------------------------------------- environment */
/* The lock key may expire only when no client is inside its validity for
   that grant: validity is measured from before the send, Redis's TTL from
   the script's execution (the timing assumption of every lease lock). */
#ifdef MUT_CONFIRM_BASE
#define BACKED(k) (((cl_unbacked >> (k)) & 1) == 0)
#else
#define BACKED(k) (true)
#endif
#define VALID_ON(k) (cl_valid[k] && BACKED(k) && (cl_fence[k] == r_fence || (r_kept != 0 && cl_fence[k] == r_kept)))
#if NC == 1
#define GRANT_VALID (VALID_ON(0))
#elif NC == 2
#define GRANT_VALID (VALID_ON(0) || VALID_ON(1))
#elif NC == 3
#define GRANT_VALID (VALID_ON(0) || VALID_ON(1) || VALID_ON(2))
#else
#error "NC must be 1..3"
#endif

#ifdef LIVENESS
/* Liveness: time only removes what nobody will refresh: an unclaimed
   grant to, or the queue entry of, a waiter whose call has returned. */
#ifdef HOLDER_CRASH
/* ... or the grant of a crashed holder (its hold only) */
#define EXPIRY_OK ((r_pending != 0 && cl_wid[w_client[r_pending]] != r_pending) || \
                   (r_pending == 0 && r_holds == 0 && r_orph == 0 && r_stale != 0))
#else
#define EXPIRY_OK (r_pending != 0 && cl_wid[w_client[r_pending]] != r_pending)
#endif
#ifdef LAPSE_ONCE
#define LAPSE_OK(w) (cl_wid[w_client[w]] != w || !w_paused)
#define LAPSE_NOTE(w) if :: cl_wid[w_client[w]] == w -> w_paused = true :: else -> skip fi
#else
#define LAPSE_OK(w) (cl_wid[w_client[w]] != w)
#endif
#else
#define EXPIRY_OK (true)
#define LAPSE_OK(w) (true)
#endif

#ifdef LATE_TRY
/* Client k's held-up first try reaches the script at last (it sat in the
   server's input on the connection the client gave up on). While its call
   goes on it is one more try of the call; once the call is over its hold
   id is nobody's (add_hold with NC). (g): it must not add a hold of a call
   that returned without the lock. */
inline late_run(k) {
  if
  :: late_st[k] == 1 -> printf("redis: the held-up try of c%d runs now, its call (or the lease it got) still going\n", k)
  :: late_st[k] == 2 -> printf("redis: the held-up try of c%d runs now, after its call returned without the lock\n", k)
  :: late_st[k] == 3 -> printf("redis: the held-up try of c%d runs now, after its lease was released\n", k)
  fi;
  if
  :: late_st[k] == 1 -> acquire_fair(k, late_owner[k], late_wid[k])
  :: else ->
     hk_ = k;
     acquire_fair(NC, late_owner[k], late_wid[k]);
#ifdef CHECK_GIVEBACK
     /* (g): the call returned without the lock and gave its hold id back */
     assert(!(late_st[k] == 2 && g_res))
#else
     skip
#endif
  fi;
  late_st[k] = 4; late_owner[k] = 0; late_wid[k] = 0;
  gc()
}
#define LATE(k) \
  :: d_step { late_st[k] >= 1 && late_st[k] <= 3 -> late_run(k) }
#endif

#if defined(WATCHDOG_PRESENCE) && !defined(LIVENESS)
/* The watchdog's refresh of client k's queued waiter (PresenceScript), at
   any moment while the call goes on (it is kept from its first queueing
   attempt to its Leave; one sent before the Leave may run after it, when
   the entry is gone: {0}, nothing). Its answer only decides when the
   waiter attempts, which the safety runs leave free anyway. Enabled only
   where the script changes something (PRESENCE_ACTS): with the lock free
   and a lapsed head, live_head drops it (the script as in scripts.cc:
   only while the waiter's own entry is live; 40f62d6's: while it exists,
   and its own lapsed entry is revived). Elsewhere it is an HSET of a live
   entry with the same owner and a later deadline, nothing in the untimed
   model, or a {0} that changes nothing: left out (they only add
   transitions back to the same state), except in the probe build, where
   the {0} / {2} branches are probes 18, 20 and 25, and where (w) is
   checked (CHECK_WAKE, so in every run of all properties): there also the
   {2} answers and the owner case's {1} (a hand-off pending), back to the
   same state too (about 1-3 % more transitions). */
#if defined(COVER)
#define PRESENCE_ACTS(k, w) (w_owner[w] != 0 && (r_owner == 0 || w_lapsed[w] || r_owner == cl_owner[k]))
#elif defined(MUT_PRESENCE_HEXISTS)
#define PRESENCE_ACTS(k, w) (w_owner[w] != 0 && (r_owner == 0 || w_lapsed[w]))
#elif defined(CHECK_WAKE)
/* (w) checks every {2}: also where the answer changes nothing — the
   waiter first at a free lock, and the lock held under its owner token
   (the {2} of the owner case, or its {1} while a hand-off is pending) */
#define PRESENCE_ACTS(k, w) (w_owner[w] != 0 && !w_lapsed[w] && \
                             ((r_owner == 0 && (w_lapsed[q[0]] || q[0] == w)) || r_owner == cl_owner[k]))
#else
#define PRESENCE_ACTS(k, w) (w_owner[w] != 0 && !w_lapsed[w] && r_owner == 0 && w_lapsed[q[0]])
#endif
#define PRESENCE(k) \
  :: d_step { cl_wid[k] != 0 && PRESENCE_ACTS(k, cl_wid[k]) -> \
              presence_script(k, cl_wid[k], cl_owner[k]); gc() }
#endif

#ifndef LAPSE_NOTE
#define LAPSE_NOTE(w) skip
#endif
#define LAPSE(k) \
  :: d_step { qlen > k && !w_lapsed[q[k]] && LAPSE_OK(q[k]) -> w_lapsed[q[k]] = true; \
              LAPSE_NOTE(q[k]); \
              printf("redis: presence of a waiter of c%d lapses\n", w_client[q[k]]) }

active proctype Env() {
  do
  :: /* PEXPIRE ran out (lease or claim window): the key is gone, no
        script runs, no unlock event */
     d_step {
       r_owner != 0 && !GRANT_VALID && EXPIRY_OK;
       printf("redis: key of owner %d, fence %d expires\n", r_owner, r_fence);
       if :: r_holds != 0 -> REACHED(7) :: else -> skip fi;    /* held */
#ifdef COVER
       j_ = 0;                         /* an unconfirmed grant in full */
       do
       :: j_ < NC ->
          if :: r_claim && ((r_holds >> j_) & 1) && cl_wid[j_] != 0 -> REACHED(27) :: else -> skip fi;
          j_++
       :: else -> break
       od;
#endif
       if :: r_pending != 0 -> REACHED(11) :: else -> skip fi; /* unclaimed */
#if defined(LIVENESS) && defined(WATCHDOG_PRESENCE)
       TTL_END(0);                     /* ttl_at passed for whoever saw it */
#if NC > 1
       TTL_END(1);
#endif
#if NC > 2
       TTL_END(2);
#endif
#endif
       del_lock();
       gc()
     }
  /* a waiter's presence deadline passes (it paused, crashed, or left
     without abandoning); live_head drops it when it reaches the head */
  LAPSE(0)
  LAPSE(1)
  LAPSE(2)
#if QMAX > 3
  LAPSE(3)
#endif
#if QMAX > 4
  LAPSE(4)
#endif
#if QMAX > 5
  LAPSE(5)
#endif
#if QMAX > 6
  LAPSE(6)
#endif
#if QMAX > 7
  LAPSE(7)
#endif
#if defined(WATCHDOG_PRESENCE) && !defined(LIVENESS)
  PRESENCE(0)
#if NC > 1
  PRESENCE(1)
#endif
#if NC > 2
  PRESENCE(2)
#endif
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

#if !defined(LIVENESS) && !defined(NO_OPERATOR)
/* An operator (lockfleet CLI / LockClient::ForceUnlock) force-unlocks once. */
active proctype Operator() {
  /* Inspect (InspectScript), or the operator names the grant */
  d_step {
    r_owner != 0;
    op_owner = r_owner; op_fence = r_fence;
    printf("operator: Inspect: owner %d, fence %d\n", op_owner, op_fence)
  };
  /* EvalRetryOnce(ForceUnlockScript, expected owner + fence) */
  if
  :: d_step { force_script(); gc() }
  :: d_step { force_script(); gc();
              printf("operator: reply lost (the script ran); retrying\n") };
     d_step { force_script(); gc() }
  fi;
  op_owner = 0
}
#endif

init {
  atomic {
#ifdef COVER
    c_code { char *k_ = getenv("LOCKFLEET_COVER"); cover_k = k_ ? atoi(k_) : 0; };
#endif
    i_ = 0;
    do
    :: i_ < NC -> run Client(i_); i_++
    :: else -> break
    od
  }
}

#if defined(LIVENESS) && defined(ATTACKER)
/* Someone who can write to the unlock-event topic replays (or forges) a
   force event naming each grant, as often as it likes: the hand-off
   events carry next_owner and next_fence, so it knows every grant. */
inline force_event(k) {
  printf("attacker: unlock event, cause force, naming owner %d fence %d, to c%d\n",
         cl_owner[k], cl_fence[k], k);
#ifdef BUG_FORCE_EVENT_REVOKES
  revoke(k)                              /* bug 1: MarkLostIfHeld */
#else
  renew_script(k);                       /* fix: renew now; only Redis's */
  if :: !g_res -> revoke(k) :: else -> skip fi   /* "not ours" ends it */
#endif
}

active proctype Attacker() {
  do
  :: d_step { cl_bel[0]; force_event(0) }
#if NC > 1
  :: d_step { cl_bel[1]; force_event(1) }
#endif
#if NC > 2
  :: d_step { cl_bel[2]; force_event(2) }
#endif
  od
}
#endif

#ifdef LIVENESS
/* (d) under weak fairness, a waiter that does not give up is granted. */
ltl live0 { [] ((cl_wid[0] != 0) -> <> cl_bel[0]) }
/* (f) under weak fairness, and whatever events arrive, a call that does
   not give up gets its work done while holding the lock. */
ltl work0 { [] ((cl_wid[0] != 0) -> <> cs_done[0]) }
#endif
