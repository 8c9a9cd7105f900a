// OffsetTracker: which offsets of a consumer-group member's partitions may be
// committed, given the records it handed out and the ones since finished.
//
// Per assigned partition it keeps the records taken but not finished. The
// committable offset is the lowest unfinished one, or (all finished) the last
// taken + 1, once that is past the first record taken: with 5, 6, 7 taken
// and 6, 7 finished nothing is committed; once 5 is finished too, 8 is. Each
// assignment of a partition gets a new epoch, carried by its records, so
// finishing a record of a revoked (perhaps since re-assigned) partition changes
// nothing. Offsets to commit only ever grow, and never drop to or below what
// this member has already committed for the partition, in any epoch.
//
// Pure bookkeeping, no Kafka calls. Thread-safety: all methods may be called
// from any thread concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

namespace lockfleet::notifier {

class OffsetTracker {
 public:
  struct Commit {
    int32_t partition = 0;
    int64_t offset = 0;  // the next offset to consume, as Kafka commits it
  };

  // Starts a new epoch for `partition` (replacing any current one) and
  // returns it; epochs are unique over the tracker's life, never 0.
  uint64_t Assign(int32_t partition);
  // Forgets `partition`: its records' Done calls are ignored from now on.
  void Revoke(int32_t partition);

  // A record was handed out. Returns its epoch, or nullopt when `partition`
  // is not assigned (the record must not be handed out).
  std::optional<uint64_t> Take(int32_t partition, int64_t offset);
  // The record is finished. Returns false (and changes nothing) when its
  // partition is no longer assigned in `epoch`.
  bool Done(int32_t partition, uint64_t epoch, int64_t offset);

  // What to commit now for the assigned partitions (all of them, or those in
  // `only` when it is not empty): each committable offset that is above
  // what was already committed and, unless `resend_in_flight`, above what
  // was already requested. The returned offsets count as requested.
  std::vector<Commit> Due(const std::vector<int32_t>& only = {},
                          bool resend_in_flight = false);
  // The result of committing `offset` for `partition` (any epoch). A failure
  // makes the offset due again (unless a later one was requested since).
  void Committed(int32_t partition, int64_t offset, bool ok);

  std::vector<int32_t> Partitions() const;
  // Highest offset this member committed for `partition`, or -1.
  int64_t CommittedOffset(int32_t partition) const;

 private:
  struct Partition {
    uint64_t epoch = 0;
    std::set<int64_t> unfinished;  // taken, not yet Done
    int64_t first_taken = -1;      // lowest offset taken, -1: none yet
    int64_t last_taken = -1;       // highest offset taken, -1: none yet
    int64_t requested = -1;        // highest offset sent for commit
  };
  static int64_t Committable(const Partition& p);

  mutable std::mutex mu_;
  uint64_t last_epoch_ = 0;
  std::map<int32_t, Partition> assigned_;
  std::map<int32_t, int64_t> committed_;  // floor, kept across epochs
};

}  // namespace lockfleet::notifier
