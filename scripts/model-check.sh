#!/usr/bin/env bash
# Model-checks the fair lock protocol (model/fair_lock.pml), the
# semaphore protocol (model/semaphore.pml, the sem-* checks), the
# read-write lock protocol (model/rwlock.pml, the rw-* checks) and the
# multi-lock (model/multi_lock.pml, the ml-* checks) with spin: the
# protocol must satisfy every property, each bug or mutation put back must
# be caught with a counter-example, and each reachability probe must be
# reached. See model/README.md for the models, the properties and the bugs.
#
# Usage: scripts/model-check.sh [--list] [--keep] [--full] [CHECK...]
#
#   CHECK    names from --list (default: all but the --full ones)
#   --list   print the checks and exit
#   --keep   keep the work dir (pan builds, trails) and print its path
#   --full   also the big runs (3 clients with shared owner tokens:
#            safety3-shared now past its 4 GB bound, see model/README.md;
#            safety3-infull 12 million states, 2-4 min, 2 GB; not for CI)
#
# Every pan is built and run in a temporary directory, never in the repo;
# the reachability probes share one build (LOCKFLEET_COVER picks the probe;
# the rw-reach* probes another, the ml-reach* probes a third).
# Prints per check the states explored (spin's "states, stored"), the
# transitions and the time; for a caught bug the counter-example as a
# narrative; then one line "model: N passed, M failed". Exits 1 if any
# check failed: a property violated by the fixed model, a search that did
# not complete, or a bug variant that was not caught.
#
# Environment: LOCKFLEET_JOBS (default 2) checks run at once;
# LOCKFLEET_MODEL_TIMEOUT (default 600) seconds per check;
# LOCKFLEET_SUMMARY_FILE gets one line in ctest's summary format.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODEL="$LOCKFLEET_ROOT/model/fair_lock.pml"
SEM_MODEL="$LOCKFLEET_ROOT/model/semaphore.pml"
RW_MODEL="$LOCKFLEET_ROOT/model/rwlock.pml"
ML_MODEL="$LOCKFLEET_ROOT/model/multi_lock.pml"
# model_of NAME: the model a check runs (sem-*: the semaphore's, rw-*: the
# read-write lock's, ml-*: the multi-lock's)
model_of() {
  case "$1" in
    sem-*) echo "$SEM_MODEL" ;;
    rw-*) echo "$RW_MODEL" ;;
    ml-*) echo "$ML_MODEL" ;;
    *) echo "$MODEL" ;;
  esac
}
TIMEOUT="${LOCKFLEET_MODEL_TIMEOUT:-600}"

# name | expect | spin -D flags | cc flags | pan flags | title
#   expect: pass                 no error, complete search
#           fail:<ERE>           an error whose pan report matches <ERE>
# Safety runs: exhaustive DFS (-DSAFETY), fences and waiter ids renamed so
# the state space is finite with no bound on the number of grants. Bug
# runs: breadth-first (shortest counter-example), real fence numbers.
SAFE_CC="-O0 -DSAFETY -DMEMLIM=2048"
BUG_SPIN="-DTRACE -DNOHIDDEN"
BUG_CC="-O0 -DSAFETY -DBFS -DMEMLIM=1024"
LIVE_CC="-O0 -DNFAIR=3 -DMEMLIM=2048"
# Call kinds (the hand-off in full): with shared tokens (the default) a
# call under token 1 or 2 (AcquireOptions::owner) queues "w:" and claims
# its hand-off; a call under its client's own token (DefaultOwner) queues
# "g:" and is handed the lock in full — for the clients in FULL_MASK (bit
# c; default all). With DISTINCT_OWNERS and in the liveness runs a call
# under the client's own token is in full (FULL_MASK) or to claim
# (CLAIM_MASK: an explicit lease, min_replicas). The five one-property
# runs below have shared tokens only (FULL_MASK=0: every hand-off to
# claim); infull2 adds each client's own token, so its state space holds
# theirs, and checks all the properties at once.
F0="-DFULL_MASK=0"
CHECKS=(
  "mutex|pass|-DCHECK_MUTEX $F0|$SAFE_CC|-m400000|(a) mutual exclusion; 2 clients, shared owner tokens (hand-offs to claim), all faults"
  "fence|pass|-DCHECK_FENCE $F0|$SAFE_CC|-m400000|(b) each grant's fence exceeds every fence in use; 2 clients"
  "handoff|pass|-DCHECK_HANDOFF $F0|$SAFE_CC|-m400000|(c) no grant to a waiter that has left; 2 clients"
  "nofalse|pass|-DCHECK_NOFALSE $F0|$SAFE_CC|-m400000|(e) no false revocation; 2 clients"
  "giveback|pass|-DCHECK_GIVEBACK $F0|$SAFE_CC|-m400000|(g) a call that returns without the lock leaves no hold of its own; 2 clients"
  "infull2|pass||-O2 -DSAFETY -DMEMLIM=2048|-m400000|(a)(b)(c)(e)(g)(p)(w) together; 2 clients, shared tokens (to claim) and each client's own token (hand-offs in full), all faults"
  "safety3|pass|-DNC=3 -DDISTINCT_OWNERS -DUNANSWERED=1 -DFULL_MASK=1 -DCLAIM_MASK=6|-O2 -DSAFETY -DMEMLIM=3072|-m2000000|(a)(b)(c)(e)(g)(p)(w) together; 3 clients, one owner token each (client 0 in full, 1 and 2 to claim), client 0's tries may go unanswered"
  "live2|pass|-DLIVENESS -DATTACKER -DHOLDER_CRASH -DLAPSE_ONCE|$LIVE_CC|-a -f -m1000000 -N live0|(d) a waiter that does not give up is granted (weak fairness; parks on while the watchdog confirms, unlock events lost; a holder may crash and a waiting entry lapse, once; calls in full or to claim); 2 clients"
  "live3|pass|-DLIVENESS -DATTACKER -DNC=3 -DFULL_MASK=3 -DCLAIM_MASK=5|$LIVE_CC|-a -f -m1000000 -N live0|(d) as above (client 0 in full or to claim, 1 in full, 2 to claim); 3 clients"
  "work2|pass|-DLIVENESS -DATTACKER|$LIVE_CC|-a -f -m1000000 -N work0|(f) a call that does not give up gets its work done, whatever force events arrive; 2 clients"
  "work3|pass|-DLIVENESS -DATTACKER -DNC=3 -DFULL_MASK=1 -DCLAIM_MASK=6|$LIVE_CC|-a -f -m1000000 -N work0|(f) as above (client 0 in full, 1 and 2 to claim); 3 clients"
  "bug1|fail:assertion violated +!\(\(\(\(r_owner!=0\)|-DBUG_FORCE_EVENT_REVOKES -DCHECK_NOFALSE $BUG_SPIN|$BUG_CC||bug 1 put back (a force event marks the hold lost): (e) must fail"
  "bug1-work|fail:acceptance cycle|-DLIVENESS -DATTACKER -DBUG_FORCE_EVENT_REVOKES -DCHECK_MUTEX|$LIVE_CC|-a -f -m1000000 -N work0|bug 1 put back, replayed force events: (f) must fail"
  "bug2|fail:assertion violated .*cl_owner\[j_\]==cl_owner\[c\]|-DBUG_FORCE_NOT_IDEMPOTENT -DCHECK_MUTEX $BUG_SPIN|$BUG_CC||bug 2 put back (force-unlock deletes any grant): (a) must fail"
  "bug7|fail:assertion violated \(cl_wid\[w_client\[h_\]\]==h_\)|-DBUG_PHANTOM_QUEUE -DCHECK_HANDOFF -DFULL_MASK=0 $BUG_SPIN|$BUG_CC||bug 7 put back (phantom queue entry): (c) must fail"
  "bug-pertry|fail:assertion violated .*r_leak|-DBUG_HOLD_PER_TRY -DCHECK_GIVEBACK $BUG_SPIN|$BUG_CC||the client before cdf7a39 put back (a hold id per try, bounded orphans_): (g) must fail"
  "late|fail:assertion violated +!\(\(\(late_st\[[0-9]\]==2\)|-DLATE_TRY -DCHECK_GIVEBACK -DNO_OPERATOR $BUG_SPIN|$BUG_CC||known limit: a held-up try runs after its call gave its hold back: (g) fails (bound: the lease)"
  "late-queue|fail:assertion violated \(cl_wid\[w_client\[h_\]\]==h_\)|-DLATE_TRY -DCHECK_HANDOFF -DNO_OPERATOR $BUG_SPIN|$BUG_CC||known limit: a held-up try queues a waiter id after its call: (c) fails (bound: presence + claim window)"
  "late-fresh|pass|-DLATE_TRY -DDISTINCT_OWNERS -DCHECK_MUTEX -DCHECK_FENCE -DNO_OPERATOR -DFULL_MASK=1 -DCLAIM_MASK=2|$SAFE_CC|-m400000|(a)(b) with held-up tries and fresh replacements (one owner token per client; client 0 in full, 1 to claim): a replaced grant's key outlives its holder's validity; 2 clients"
  "mut-fresh|fail:assertion violated .*cl_owner\[j_\]==cl_owner\[c\]|-DLATE_TRY -DDISTINCT_OWNERS -DMUT_FRESH_SHRINKS -DCHECK_MUTEX -DNO_OPERATOR $BUG_SPIN|$BUG_CC||mutation: a fresh replacement sets the lease, not max(PTTL, lease): a held-up try cuts a later call's key short, (a) must fail"
  "mut-fence|fail:assertion violated .*g_fence>|-DMUT_FENCE_RESET -DCHECK_FENCE $BUG_SPIN|$BUG_CC||mutation: fence counter deleted with the lock: (b) must fail"
  "mut-unacked|fail:assertion violated .*r_holds|-DBUG_UNACKED_KEPT -DMUT_ABANDON_KEEPS_HOLD -DCHECK_GIVEBACK $BUG_SPIN|$BUG_CC||mutation: a grant too few replicas acknowledged is given back neither by the call nor by its abandon: (g) must fail"
  "mut-requeue|fail:acceptance cycle|-DLIVENESS -DNC=3 -DMUT_REQUEUE|$LIVE_CC|-a -f -m1000000 -N live0|mutation: a refresh requeues at the tail: (d) must fail"
  "mut-presence-hexists|fail:assertion violated \(phantom_==0\)|-DMUT_PRESENCE_HEXISTS $BUG_SPIN|$BUG_CC||40f62d6 put back (PresenceScript refreshes an entry that merely exists): a lapsed head dropped by its live_head is written back into the hash alone, no-phantom must fail"
  "mut-presence-free|fail:acceptance cycle|-DLIVENESS -DHOLDER_CRASH -DMUT_PRESENCE_FREE|$LIVE_CC|-a -f -m1000000 -N live0|mutation: PresenceScript refreshes ({1}) a waiter first at a free lock: it parks on, everyone behind it refused, (d) must fail"
  "mut-confirm-base|fail:assertion violated .*cl_owner\[j_\]==cl_owner\[c\]|-DMUT_CONFIRM_BASE -DCHECK_MUTEX $BUG_SPIN|$BUG_CC||mutation: a grantee in full counts its validity from its confirming read, not from the last send that found it queued: the claim window ends while it believes, (a) must fail"
  "mut-confirm-owner-only|fail:assertion violated .*cl_owner\[j_\]==cl_owner\[c\]|-DMUT_CONFIRM_OWNER_ONLY -DMUT_INFULL_SHARED -DCHECK_MUTEX -DNO_OPERATOR $F0 $BUG_SPIN|-O0 -DSAFETY -DMEMLIM=1024|-m60|mutation: the confirming read checks the owner only, not the call's hold (with calls under a shared token in full): a grant of another call of the token is taken, (a) must fail (depth-bounded DFS: not the shortest)"
  "mut-infull-shared|fail:assertion violated +!\(\(\(\(r_claim|-DMUT_INFULL_SHARED -DCHECK_PRIVATE $BUG_SPIN|$BUG_CC||mutation: calls under a shared token are handed the lock in full: another call of the token re-enters the grant before its grantee confirms, (p) must fail"
  "mut-presence-pending|fail:assertion violated \(\(\(g_res!=2\)|-DMUT_PRESENCE_PENDING -DCHECK_WAKE $BUG_SPIN|$BUG_CC||mutation: PresenceScript's owner case does not read pending_of: {2} for a lock held under the waiter's owner token while a hand-off is pending to another waiter, whose attempt is refused (a wake -> refuse loop), (w) must fail (infull2's configuration)"
)
# The semaphore (model/semaphore.pml; P = 2 permits, k = 1 or 2 per call).
# sem-late-try and sem-late-queue were findings of this model against the
# scripts and client (model/README.md), fixed since; sem-mut-try-leave and
# sem-mut-release-queue put each back and must fail.
SEM_CC="-O2 -DSAFETY -DMEMLIM=2048"
SEM_LATE="-DLATE_TRY -DNO_UNANSWERED_END -DUNANSWERED=0"
SEM_LIVE_CC="-O2 -DNFAIR=3 -DMEMLIM=2048"
SEM_ABC="-DCHECK_BOOK -DCHECK_BELIEF -DCHECK_TOMB"
CHECKS+=(
  "sem-safety|pass|-DTRY_CALLS $SEM_ABC|$SAFE_CC|-m400000|semaphore (a)(b)(c): 2 clients, waits and tries, all faults but held-up tries"
  "sem-safety3|pass|-DNC=3 -DTRY_CALLS -DUNANSWERED=0 -DNO_UNANSWERED_END $SEM_ABC|$SEM_CC|-m1000000|semaphore (a)(b)(c): 3 clients, lost replies answered on retry, no crash"
  "sem-late|pass|$SEM_LATE $SEM_ABC|$SEM_CC|-m400000|semaphore (a)(b)(c) with held-up tries (tombstones); 2 clients, AcquireUntil calls"
  "sem-late-try|pass|$SEM_LATE -DTRY_CALLS -DCHECK_TOMB|$SEM_CC|-m400000|semaphore (c) with held-up tries and try-only calls: a TryAcquire whose first reply was lost leaves a tombstone too; 2 clients"
  "sem-late-queue|pass|$SEM_LATE -DCHECK_TOMB_STRICT|$SEM_CC|-m400000|semaphore strict (c) with held-up tries: a release takes its id out of the queue, so no hand-off creates a set for a buried call; 2 clients"
  "sem-mut-try-leave|fail:assertion violated .*s_win|$SEM_LATE -DTRY_CALLS -DCHECK_TOMB -DMUT_TRY_NO_LEAVE $BUG_SPIN|$BUG_CC||mutation (finding 1 put back): a TryAcquire with a lost first reply leaves no tombstone: (c) must fail"
  "sem-mut-release-queue|fail:assertion violated +!\\(\\(g_over\\[v_\\]&&\\(s_k\\[v_\\]!=0\\)\\)\\) \\(at|$SEM_LATE -DCHECK_TOMB_STRICT -DMUT_RELEASE_KEEPS_QUEUE $BUG_SPIN|$BUG_CC||mutation (finding 2 put back): a release leaves a held-up try's queue entry: strict (c) must fail"
  "sem-mut-bury|fail:assertion violated .*s_win|$SEM_LATE -DMUT_NO_BURY -DCHECK_TOMB $BUG_SPIN|$BUG_CC||mutation: sem_bury does nothing (no tombstone): (c) must fail"
  "sem-mut-fit|fail:assertion violated \\(used<=2\\)|-DMUT_HANDOFF_NO_FIT -DCHECK_BOOK $BUG_SPIN|$BUG_CC||mutation: sem_hand_off hands to the head whether or not its k fits: (a) must fail"
  "sem-mut-claim|fail:assertion violated .*s_k\\[cl_id\\[j_\\]\\]==cl_k\\[j_\\]|-DMUT_CLAIM_KEEPS_WINDOW -DCHECK_BELIEF $BUG_SPIN|$BUG_CC||mutation: a claim keeps the claim window as the set's lease: (b) must fail"
  "sem-live|pass|-DLIVENESS -DNC=3 -DTRY_CALLS|$SEM_LIVE_CC|-a -f -m1000000 -N live0|semaphore (d) a waiter that does not give up is granted (weak fairness, bounded park); 3 clients"
  "sem-wake|pass|-DLIVENESS -DNC=3 -DTRY_CALLS -DUNBOUNDED_PARK|$SEM_LIVE_CC|-a -f -m1000000 -N live0|semaphore (d) as above with parks woken only by hand-off wakes (no lost wake-up); 3 clients"
  "sem-mut-listen|fail:acceptance cycle|-DLIVENESS -DUNBOUNDED_PARK -DMUT_LISTEN_LATE|$SEM_LIVE_CC|-a -f -m1000000 -N live0|mutation: the wait slot registered at the park, not before the attempt: a hand-off's wake is lost, (d) must fail"
)
SEM_PROBES=(
  "1||a lapsed waiter is dropped from the head of the queue"
  "2|$SEM_LATE|a held-up try of an ended call meets its tombstone (-3)"
  "3||a hand-off is claimed"
  "4||an abandon gives back a set (a hand-off, or a lost reply's grant)"
  "5||a set is taken back while its holder still has its Permits (lease ended)"
  "6||an acquire script hands off permits sem_expire freed"
  "7||a release finds its set gone (not held)"
  "8||an unclaimed hand-off's claim window ends"
  "9|$SEM_LATE|a held-up try of a going call gets the call's set"
  "10||strict FIFO: a head that does not fit stops the hand-off with permits free"
)
for p in "${SEM_PROBES[@]}"; do
  IFS='|' read -r n flags what <<<"$p"
  CHECKS+=("sem-reach$n|fail:assertion violated \\($n!=$n\\)|-DTRY_CALLS -DSEM_COVER=$n $flags|$SAFE_CC|-m400000|semaphore reachable: $what")
done
# The read-write lock (model/rwlock.pml; a read set takes 1 of P = 8
# permits, a write set all 8). Slots c0 and c1 are one thread's two leases
# (owner 1: nested calls, reentrancy, downgrade, upgrade), c2 owner 2;
# -DNO_NEST: every slot its own owner. All pass checks run -O0: pan.c is
# big and -O2 costs more to build than it saves below ~2 million states.
# rw-shared-handoff checks the fix of this model's finding (model/README.md);
# rw-mut-upgrade-handoff re-introduces the finding and must fail.
RW_CC="-O0 -DSAFETY -DMEMLIM=2048"
RW_LIVE_CC="-O0 -DNFAIR=3 -DMEMLIM=2048"
RW_ANSWERED="-DUNANSWERED=0 -DNO_UNANSWERED_END"
RW_BUG="$RW_ANSWERED -DNO_EXPIRY $BUG_SPIN"
RW_NOH="-DCHECK_EXCL -DCHECK_BELIEF -DCHECK_BOOK -DCHECK_TOKEN -DCHECK_FIFO -DCHECK_UPGRADE -DCHECK_REENTRY"
CHECKS+=(
  "rw-safety|pass|$RW_ANSWERED|$RW_CC|-m1000000 -w22|read-write lock (a)(b)(c)(t)(f)(h)(u)(r): one thread's two nested leases (owner 1) and owner 2; lost replies, stalls, lease ends, lapses"
  "rw-faults|pass|-DNO_NEST -DNS=2 -DTRY_CALLS -DCHECK_TOMB $RW_NOH -DCHECK_ALL_HANDED|$RW_CC|-m1000000 -w21|read-write lock (a)(b)(c)(t)(f)(h)(g): 2 owners, waits and tries, all faults (unanswered retries, crashes, replica shortfalls) but held-up tries"
  "rw-fair|pass|-DNO_NEST -DTRY_CALLS -DNO_LEASE_END -DWRITERS=2 -DREADERS=4 $RW_ANSWERED|$RW_CC|-m1000000 -w21|read-write lock (f) FIFO, (h) every fitting reader handed, and the rest: 3 owners (c0 reads or writes, c1 writes, c2 reads), waits and tries, lost replies, lapses"
  "rw-late|pass|-DNO_NEST -DNS=2 -DLATE_TRY $RW_ANSWERED -DCHECK_TOMB -DCHECK_EXCL -DCHECK_BELIEF -DCHECK_BOOK -DCHECK_TOKEN|$RW_CC|-m1000000 -w22|read-write lock (a)(b)(c)(t)(g) with held-up tries (late tries after the call ended meet the tombstone); 2 owners"
  "rw-shared|pass|-DSHARED_OWNER -DREADERS=2 -DNO_LEASE_END $RW_ANSWERED $RW_NOH|$RW_CC|-m1000000 -w21|read-write lock, owner 1 a custom token of two threads (c1 reads; no fresh): everything but (h); lost replies, lapses"
  "rw-shared-handoff|pass|-DSHARED_OWNER -DREADERS=2 -DCHECK_ALL_HANDED $RW_ANSWERED -DNO_EXPIRY|$RW_CC|-m1000000 -w21|read-write lock (h) with a shared owner token: a queued write refused as an upgrade (-4) hands on what its place blocked (the model's finding, fixed)"
  "rw-mut-upgrade-handoff|fail:assertion violated .*\\(used\\+w_k\\[q\\[i_\\]\\]\\)>8|-DSHARED_OWNER -DREADERS=2 -DCHECK_ALL_HANDED -DMUT_NO_UPGRADE_HANDOFF $RW_BUG|$BUG_CC|-w20|mutation (the model's finding): the -4 branch leaves the queue without handing off: readers behind it wait for their park bound, (h) fails"
  "rw-live|pass|-DLIVENESS -DTRY_CALLS|$RW_LIVE_CC|-a -f -m1000000 -w20 -N live0|read-write lock (d) a waiter that does not give up is granted (weak fairness, bounded park); nested leases and owner 2"
  "rw-wake|pass|-DLIVENESS -DNO_NEST -DUNBOUNDED_PARK -DWRITERS=2 -DREADERS=4|$RW_LIVE_CC|-a -f -m1000000 -w20 -N live0|read-write lock (d) with parks woken only by hand-off wakes: one release hands several readers and one event wakes them all; 3 owners (c0 reads or writes, c1 writes, c2 reads)"
  "rw-mut-mode|fail:assertion violated .*s_own\\[v_\\]==wo_|-DMUT_ANY_MODE -DCHECK_EXCL $RW_BUG|$BUG_CC|-w20|mutation: the reentrancy check ignores the mode: a write beside the owner's reads (an upgrade) past the queue, (a) must fail"
  "rw-mut-skip|fail:assertion violated w_lapsed\\[q\\[i_\\]\\]|-DNO_NEST -DMUT_HANDOFF_SKIP -DCHECK_FIFO $RW_BUG|$BUG_CC|-w20|mutation: sem_hand_off looks past a writer at the head and grants the reader behind it, (f) must fail"
  "rw-mut-one|fail:assertion violated .*\\(used\\+w_k\\[q\\[i_\\]\\]\\)>8|-DNO_NEST -DMUT_HANDOFF_ONE -DCHECK_ALL_HANDED $RW_BUG|$BUG_CC|-w20|mutation: sem_hand_off grants one waiter: a release leaves fitting readers queued, (h) must fail"
  "rw-mut-count|fail:assertion violated .*s_own\\[v_\\]==wo_|-DMUT_FREE_COUNTS -DCHECK_EXCL $RW_BUG|$BUG_CC|-w20|mutation: sem_free leaves the owner's n:/x: counts: a stale count grants a write past the fit check, (a) must fail"
  "rw-mut-try-head|fail:assertion violated w_lapsed\\[q\\[i_\\]\\]|-DNO_NEST -DTRY_CALLS -DMUT_TRY_HEAD -DCHECK_FIFO $RW_BUG|$BUG_CC|-w20|mutation: a fair TryAcquire ignores the queue head: a reader gets in ahead of a queued writer, (f) must fail"
  "rw-mut-token|fail:assertion violated .*cl_tok\\[j_\\]==r_fence|-DMUT_TOKEN_EACH -DCHECK_TOKEN $RW_BUG|$BUG_CC|-w20|mutation: every write set (a reentrant one too) takes a new writer token: a holder's token is no longer the last, (t) must fail"
  "rw-mut-event|fail:acceptance cycle|-DLIVENESS -DNO_NEST -DUNBOUNDED_PARK -DWRITERS=2 -DREADERS=4 -DMUT_EVENT_FIRST|$RW_LIVE_CC|-a -f -m1000000 -w20 -N live0|mutation: the kPermits event names only the first remote grantee: a reader handed the lock with others is never woken, (d) must fail"
  "rw-mut-listen|fail:acceptance cycle|-DLIVENESS -DUNBOUNDED_PARK -DMUT_LISTEN_LATE|$RW_LIVE_CC|-a -f -m1000000 -w20 -N live0|mutation: the wait slot registered at the park, not before the first attempt: a hand-off's wake is lost, (d) must fail"
)
# The rw probes share one build (rwlock.pml with -DCOVER and RW_PROBE_SPIN;
# LOCKFLEET_COVER=<n> picks one).
RW_PROBE_SPIN="-DCOVER -DTRY_CALLS -DUNANSWERED=0"
RW_PROBES=(
  "1|a downgrade: a write released while the thread reads beside it"
  "2|an upgrade refused (-4)"
  "3|a reentrant read granted past a queued writer"
  "4|one hand-off grants several waiters (readers)"
  "5|a read set made beside its owner's write (the writer's token)"
  "6|a reentrant write beside the owner's write"
  "8|a write set taken back while its holder still has its lease (a stall)"
  "9|a handed write is claimed"
  "10|a fair TryAcquire refused for a live waiter ahead although it fits"
  "11|a fresh call refused while its token has a set out (not counted as the caller's)"
  "12|a nested read granted beside the thread's believed write"
  "13|a give-up gives a set back (SemAbandon)"
)
# add_reach_checks PREFIX SPIN_FLAGS PAN_FLAGS TITLE PROBES...: one check
# "<PREFIX>reach<n>" per probe "<n>|<what>", each expecting its cover_k
# assertion (the probe reached).
add_reach_checks() {
  local prefix="$1" spin_flags="$2" pan_flags="$3" title="$4" p n what
  shift 4
  for p in "$@"; do
    IFS='|' read -r n what <<<"$p"
    CHECKS+=("${prefix}reach$n|fail:assertion violated \\(cover_k!=$n\\)|$spin_flags|$SAFE_CC|$pan_flags|$title reachable: $what")
  done
}
add_reach_checks rw- "$RW_PROBE_SPIN" "-m400000 -w19" "read-write lock" "${RW_PROBES[@]}"
# The multi-lock (model/multi_lock.pml): locks L0 < L1; M1 and M2 take both
# (M2 names them L1, L0), S0 takes L0 and S1 L1 (-DONE_S: S0 either).
# Default: every wait may give up, the atomic try's reply may be lost (the
# retry answered or not), a multi-lock call may be a TryAcquireAll, claim
# windows and the leases of grants nobody holds may end. (d) is spin's
# invalid-end-state check, on in every run (no -E): it holds with
# give-ups too; ml-deadlock is the run without them.
ML_MUT_ALL="assertion violated \\(\\(hm\\[[01]\\]&"
CHECKS+=(
  "ml-safety|pass|-DMCALLS=2|$SAFE_CC|-m400000|multi-lock (a) mutual exclusion (m) all-or-nothing (f) FIFO, and (d): 2 multi-lock clients (2 calls each, waits and tries), S0 on L0, S1 on L1; give-ups, lost replies, expiries"
  "ml-safety-one-s|pass|-DONE_S -DCROSS_SLOT -DMCALLS=2 -DSCALLS=3|$SAFE_CC|-m400000|multi-lock (a)(m)(f)(d): one single-lock client taking either lock, and calls naming locks in different slots (no atomic try)"
  "ml-deadlock|pass|-DNO_GIVE_UP -DMCALLS=2|$SAFE_CC|-m400000|multi-lock (d) deadlock freedom: no wait gives up, every client finishes (no invalid end state), with (a)(m)(f)"
  "ml-mut-no-order|fail:invalid end state|-DMUT_NO_ORDER -DNO_GIVE_UP -DSCALLS=1 $BUG_SPIN|$BUG_CC||mutation: M2's ordered path takes the locks as named (L1, then L0), no canonical sort: (d) must fail (deadlock)"
  "ml-mut-atomic-barges|fail:assertion violated \\(\\(q\\[[01]\\]\\.n==0\\)|-DMUT_ATOMIC_BARGES -DCHECK_FIFO $BUG_SPIN|$BUG_CC||mutation: the atomic try ignores the queue (grants a free lock past a queued waiter): (f) must fail"
  "ml-mut-atomic-partial|fail:$ML_MUT_ALL|-DMUT_ATOMIC_PARTIAL -DCHECK_ALL $BUG_SPIN|$BUG_CC||mutation: the atomic try grants lock by lock and keeps what it got at the first refusal: (m) must fail"
  "ml-mut-no-rollback|fail:$ML_MUT_ALL|-DMUT_NO_ROLLBACK -DCHECK_ALL $BUG_SPIN|$BUG_CC||mutation: a give-up in the ordered path keeps the locks taken (no roll-back): (m) must fail"
  "ml-mut-retry-keeps|fail:$ML_MUT_ALL|-DMUT_RETRY_KEEPS_HOLDS -DCHECK_ALL $BUG_SPIN|$BUG_CC||mutation: a retry refused after a lost reply gives nothing back (scripts.h: the caller gives the first try's holds back): (m) must fail"
  "ml-mut-retry-keeps-wait|fail:$ML_MUT_ALL|-DMUT_RETRY_KEEPS_HOLDS -DNO_TRY_CALLS -DNO_GIVE_UP -DCHECK_ALL $BUG_SPIN|$BUG_CC||the same, waiting calls only: the ordered path re-enters the kept hold under a new hold id, and the lock outlives the MultiLease's release: (m) must fail"
)
# The ml probes share one build (multi_lock.pml with -DCOVER; LOCKFLEET_COVER
# picks one).
ML_PROBE_SPIN="-DCOVER"
ML_PROBES=(
  "1|the atomic try grants both locks"
  "2|the atomic try re-enters a hold of its own (a retry finds its first try's grant)"
  "3|the atomic try refuses a free lock for a queued waiter (pttl -2)"
  "4|a hand-off is claimed"
  "5|an abandon passes on a hand-off that reached its waiter"
  "6|the fair free branch grants the queue's head (after a claim window ended)"
  "7|a give-back after an unanswered retry releases a hold of the try"
  "8|a multi-lock call parks for one lock while it holds the other"
  "9|a roll-back releases the lock taken"
  "10|an unclaimed hand-off expires with waiters queued behind it"
  "11|a retry refused after a lost reply: the give-back releases a hold of the first try"
  "12|the lease of a grant nobody believes it holds ends"
)
add_reach_checks ml- "$ML_PROBE_SPIN" -m400000 multi-lock "${ML_PROBES[@]}"
PROBES=(
  "a grant handed off is claimed (AcquireFair, branch ours, pending)"
  "the bug 7 fix removes a queued waiter id (AcquireFair, branch ours)"
  "a force-unlock finds another grant and does nothing (its retry)"
  "an abandoning waiter passes on a grant that reached it"
  "two clients hold one grant (shared owner token)"
  "a renewal answers not ours (after a force-unlock or expiry)"
  "a key expires with holds in it (validity ran out)"
  "a release is refused as not ours (a retry, or a stale grant)"
  "a lapsed waiter is dropped from the head of the queue"
  "a crashed holder's hold keeps the lock after the others release"
  "an unclaimed hand-off expires (claim window)"
  "a grant's reply arrives after its validity ran out"
  "an attempt starts with its call's hold already in the lock (an earlier try ran unseen)"
  "a call that returns without the lock gives back a hold a lost try got"
  "an orphans_ record's hold is released at the owner's next grant"
  "a grant too few replicas acknowledged throws (min_replicas)"
  "an abandon gives back the call's hold a grant carries (a lost try's)"
  "the watchdog's presence check answers {0} to a waiter first at a free lock"
  "a presence check at a free lock drops a lapsed head ahead of its live waiter (live_head)"
  "a presence check finds its waiter's own entry lapsed: {0}, nothing written"
  "a grantee in full confirms its grant with the read (ConfirmHandOff)"
  "an in-full waiter's read does not confirm (free, another grant, a hand-off to claim): the full attempt follows"
  "an abandon gives back the hold of a grant in full, the last: DEL and hand-off to the next"
  "a g: waiter and a w: waiter side by side in one queue"
  "a presence check finds the lock held under its waiter's owner token, nothing pending: {2} (shared tokens)"
  "a grantee in full re-enters its grant with its full attempt (its read did not take it)"
  "an unconfirmed grant in full expires (claim window)"
)
# Only with --full or by name.
# safety3-shared: shared tokens only (hand-offs to claim), with the
# operator. safety3-infull: client 0's own token too (in full); without
# the operator, which with client 0's third token grows the search past
# 50 million states and 4 GB (model/README.md).
FULL_CHECKS=(
  "safety3-shared|pass|-DNC=3 -DUNANSWERED=0 -DFULL_MASK=0|-O2 -DSAFETY -DCOLLAPSE -DMEMLIM=4096|-m5000000 -w27|(a)(b)(c)(e)(g)(w) together; 3 clients, shared owner tokens, every retry answered (big)"
  "safety3-infull|pass|-DNC=3 -DUNANSWERED=0 -DFULL_MASK=1 -DNO_OPERATOR|-O2 -DSAFETY -DCOLLAPSE -DMEMLIM=4096|-m5000000 -w27|(a)(b)(c)(e)(g)(p)(w) together; 3 clients, shared owner tokens (to claim) and client 0's own token (in full), every retry answered, no operator (big)"
)
# The probes share one build (spin -DCOVER); LOCKFLEET_COVER=<n> picks one.
PROBE_SPIN="-DCOVER"
for k in "${!PROBES[@]}"; do
  n=$((k + 1))
  CHECKS+=("reach$n|fail:assertion violated \(cover_k!=$n\)|$PROBE_SPIN|$SAFE_CC|-m400000|reachable: ${PROBES[$k]}")
done

list=false
keep=false
full=false
wanted=()
while (($#)); do
  case "$1" in
    --list) list=true; shift ;;
    --keep) keep=true; shift ;;
    --full) full=true; shift ;;
    -h | --help) usage 0 ;;
    -*) say "unknown option: $1"; usage ;;
    *) wanted+=("$1"); shift ;;
  esac
done

if $list; then
  for c in "${CHECKS[@]}" "${FULL_CHECKS[@]}"; do
    IFS='|' read -r name _ _ _ _ title <<<"$c"
    printf '%-15s %s\n' "$name" "$title"
  done
  exit 0
fi

selected=()
for c in "${CHECKS[@]}"; do
  name="${c%%|*}"
  if ((${#wanted[@]} == 0)) || [[ " ${wanted[*]} " == *" $name "* ]]; then
    selected+=("$c")
  fi
done
for c in "${FULL_CHECKS[@]}"; do
  name="${c%%|*}"
  if { $full && ((${#wanted[@]} == 0)); } || [[ " ${wanted[*]} " == *" $name "* ]]; then
    selected+=("$c")
  fi
done
# (grep -q reads from a process substitution, not a pipe: it stops at the
# first match, and under pipefail the writer's SIGPIPE would fail the test)
for w in "${wanted[@]}"; do
  grep -q "^$w|" < <(printf '%s\n' "${CHECKS[@]}" "${FULL_CHECKS[@]}") ||
    { say "unknown check: $w"; usage; }
done

summary() {
  if [[ -n "${LOCKFLEET_SUMMARY_FILE:-}" ]]; then
    printf 'model: %s\n' "$1" >>"$LOCKFLEET_SUMMARY_FILE"
  fi
}
for tool in spin gcc; do
  command -v "$tool" >/dev/null 2>&1 ||
    { summary "no summary ($tool not found; run scripts/setup.sh)"; die "$tool not found"; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/lockfleet-model.XXXXXX")"
if $keep; then
  say "work dir: $work"
else
  trap 'rm -rf "$work"' EXIT
fi

# The narrative of a counter-example: the model's printf lines, replayed
# from the trail (spin indents them by process; strip that). For a cycle
# (liveness), the few steps before it and the cycle itself.
narrative() {
  local spin_flags="$1" pml="$2" lines
  # shellcheck disable=SC2086
  lines="$(spin $spin_flags -t "$pml" 2>&1 |
    grep -E '^[[:space:]]+(c[0-9]|AcquireFair|Release|hand_off|Abandon|operator|redis|attacker|Sem|sem_|Rw|MultiAcquire|M[12]:|S[01]:)|START OF CYCLE' |
    sed -E 's/^[[:space:]]+/    | /; s/^.*START OF CYCLE.*$/    | ---- the cycle, repeated for ever: ----/')"
  if grep -q -- '---- the cycle' <<<"$lines"; then
    # (a lost wake earlier in the run, the cause, is shown with its script;
    # so are a crashed holder and a key's expiry)
    awk '/---- the cycle/ { c = NR } { l[NR] = $0 }
         END { s = (c > 6 ? c - 6 : 1)
               for (i = 1; i < s; i++)
                 if (l[i] ~ /not named by the event|wake for its hand-off is lost|crashes while holding|redis: key of .* expires/) {
                   print "    | ..."
                   for (j = (i > 4 ? i - 4 : 1); j <= i; j++) print l[j]
                 }
               if (s > 1) print "    | ..."
               for (i = s; i <= NR && i <= c + 60; i++) print l[i] }' <<<"$lines"
  else
    tail -n 40 <<<"$lines"
  fi
}

# run_check INDEX: builds and runs one check in $work/INDEX; writes
# $work/INDEX/verdict (PASS or FAIL) and $work/INDEX/report.
run_check() {
  local idx="$1" name expect spin_flags cc_flags pan_flags title
  IFS='|' read -r name expect spin_flags cc_flags pan_flags title <<<"${selected[$idx]}"
  local dir="$work/$idx" verdict=FAIL why="" t0 t1 status=0 cover="" model pml
  model="$(model_of "$name")"
  pml="$(basename "$model")"
  mkdir -p "$dir"
  cp "$model" "$dir/$pml"
  cd "$dir"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  if [[ "$name" == reach* || "$name" == rw-reach* || "$name" == ml-reach* ]]; then
    # the shared probe build (build_probes); the trail is written here
    local probe=probe
    [[ "$name" == rw-* ]] && probe=rwprobe
    [[ "$name" == ml-* ]] && probe=mlprobe
    cover="${name##*reach}"
    if [[ -x "$work/$probe/pan" ]]; then
      ln -s "$work/$probe/pan" pan
    else
      why="probe build failed: $(cat "$work/$probe/spin.log" "$work/$probe/gcc.log" 2>/dev/null | head -n 3 | tr '\n' ' ')"
    fi
  elif ! spin $spin_flags -a "$pml" >spin.log 2>&1; then
    why="spin failed: $(head -n 3 spin.log | tr '\n' ' ')"
  elif ! gcc -w $cc_flags -o pan pan.c >gcc.log 2>&1; then
    why="gcc failed: $(head -n 3 gcc.log | tr '\n' ' ')"
  fi
  if [[ -z "$why" ]]; then
    # shellcheck disable=SC2086
    LOCKFLEET_COVER="$cover" timeout "$TIMEOUT" ./pan $pan_flags >pan.log 2>&1 || status=$?
    local errors states trans depth elapsed
    errors="$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' pan.log | tail -n 1)"
    states="$(sed -nE 's/^ *([0-9]+) states, stored.*/\1/p' pan.log | tail -n 1)"
    trans="$(sed -nE 's/^ *([0-9.e+]+) transitions.*/\1/p' pan.log | tail -n 1)"
    depth="$(sed -nE 's/.*depth reached ([0-9]+).*/\1/p' pan.log | tail -n 1)"
    elapsed="$(sed -nE 's/^pan: elapsed time ([0-9.e+-]+).*/\1/p' pan.log | tail -n 1)"
    local stats="${states:-?} states explored (stored), ${trans:-?} transitions, depth ${depth:-?}, pan ${elapsed:-?} s"
    if ((status == 124)); then
      why="timed out after ${TIMEOUT}s"
    elif [[ "${errors:-0}" == 0 ]] &&
      grep -qE 'max search depth too small|reached -DMEMLIM bound|out of memory' pan.log; then
      why="search incomplete: $(grep -m1 -E 'max search depth too small|MEMLIM|out of memory' pan.log)"
      [[ "$expect" == pass ]] || why="NOT CAUGHT: no violation before the $why"
    elif [[ -z "$errors" ]]; then
      why="no result from pan: $(tail -n 3 pan.log | tr '\n' ' ')"
    elif [[ "$expect" == pass ]]; then
      if ((errors == 0)); then
        verdict=PASS
        why="holds: $stats"
      else
        why="VIOLATED: $(grep -m1 -E 'violated|acceptance cycle|invalid end state' pan.log); $stats"
      fi
    else
      local pattern="${expect#fail:}"
      if ((errors == 0)); then
        why="NOT CAUGHT: no violation; $stats"
      elif grep -qE "$pattern" pan.log; then
        verdict=PASS
        why="caught: $(grep -m1 -E "$pattern" pan.log | sed -E 's/^pan:1: //' | cut -c1-110); $stats"
      else
        why="wrong violation: $(grep -m1 -E 'violated|acceptance cycle|invalid end state' pan.log); $stats"
      fi
    fi
  fi
  t1=$(date +%s.%N)
  {
    printf '%s %-14s %s\n' "$verdict" "$name" "$title"
    printf '     %s; %s s with the build\n' "$why" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
    if [[ "$expect" != pass && "$name" != reach* && "$name" != sem-reach* && "$name" != rw-reach* && "$name" != ml-reach* && -f "$pml.trail" ]]; then
      if [[ "$name" == ml-* ]]; then
        echo "     counter-example (shortest):"
      elif [[ "$name" == sem-* || "$name" == rw-* ]]; then
        echo "     counter-example (shortest unless a cycle; ids renamed):"
      elif [[ "$spin_flags" == *TRACE* && "$cc_flags" == *BFS* ]]; then
        echo "     counter-example (shortest; fence numbers as issued):"
      elif [[ "$spin_flags" == *TRACE* ]]; then
        echo "     counter-example (depth-bounded search, not the shortest; fence numbers as issued):"
      else
        echo "     counter-example (fence numbers renamed, order kept):"
      fi
      narrative "$spin_flags" "$pml"
    fi
  } >report
  echo "$verdict" >verdict
}

# build_probes DIR MODEL SPIN_FLAGS: the one pan all reach checks of MODEL
# run (spin -DCOVER; each picks its probe with LOCKFLEET_COVER), built once
# in $work/DIR before the checks start.
build_probes() {
  local dir="$work/$1" model="$2" flags="$3" pml
  pml="$(basename "$model")"
  mkdir -p "$dir"
  cp "$model" "$dir/$pml"
  # shellcheck disable=SC2086
  (cd "$dir" && spin $flags -a "$pml" >spin.log 2>&1 &&
    gcc -w $SAFE_CC -o pan pan.c >gcc.log 2>&1) || true
}
if grep -q '^reach' < <(printf '%s\n' "${selected[@]}"); then
  build_probes probe "$MODEL" "$PROBE_SPIN"
fi
if grep -q '^rw-reach' < <(printf '%s\n' "${selected[@]}"); then
  build_probes rwprobe "$RW_MODEL" "$RW_PROBE_SPIN"
fi
if grep -q '^ml-reach' < <(printf '%s\n' "${selected[@]}"); then
  build_probes mlprobe "$ML_MODEL" "$ML_PROBE_SPIN"
fi

jobs_max="${LOCKFLEET_JOBS:-2}"
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || jobs_max=2
t_start=$SECONDS
say "${#selected[@]} checks, $jobs_max at a time, work dir $work"
running=0
for idx in "${!selected[@]}"; do
  if ((running >= jobs_max)); then
    wait -n || true
    running=$((running - 1))
  fi
  (run_check "$idx") &
  running=$((running + 1))
done
wait || true

passed=0
failed=0
for idx in "${!selected[@]}"; do
  if [[ -f "$work/$idx/report" ]]; then
    cat "$work/$idx/report"
  else
    printf 'FAIL %s: no report\n' "${selected[$idx]%%|*}"
  fi
  if [[ "$(cat "$work/$idx/verdict" 2>/dev/null)" == PASS ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done
total=$((passed + failed))
say "done in $((SECONDS - t_start)) s"
summary "$((total ? 100 * passed / total : 0))% tests passed, $failed tests failed out of $total"
echo "model: $passed passed, $failed failed"
((failed == 0))
