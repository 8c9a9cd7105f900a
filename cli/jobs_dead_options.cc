#include "jobs_dead_options.h"

#include "command.h"
#include "jobs_support.h"

namespace lockfleet::cli {

void AddFilterOptions(CLI::App& app, FilterArgs& args) {
  args.reason_option =
      app.add_option("--reason", args.reason,
                     "Only entries whose reason matches this glob (*, ?, "
                     "[abc], \\ escapes), e.g. 'lock * not acquired*'")
          ->type_name("GLOB");
  args.lock_option =
      app.add_option("--lock", args.lock, "Only jobs on this lock (exactly)")
          ->type_name("NAME");
}

DeadLetterFilter MakeFilter(const FilterArgs& args,
                            std::vector<std::string> ids) {
  DeadLetterFilter filter;
  filter.ids = std::move(ids);
  if (args.reason_option->count() > 0) {
    if (const std::string problem = CheckGlob(args.reason); !problem.empty()) {
      throw UsageError("--reason " + Quoted(args.reason) + ": " + problem);
    }
    filter.reason_glob = args.reason;
  }
  if (args.lock_option->count() > 0) {
    if (args.lock.empty()) throw UsageError("--lock: must not be empty");
    filter.lock = args.lock;
  }
  return filter;
}

std::string Name(const DeadLetter& d) {
  if (d.id) {
    return "job " + Quoted(*d.id) +
           (d.lock ? " (lock " + Quoted(*d.lock) + ")" : std::string());
  }
  return "the entry at index " + std::to_string(d.index) + " (no job id)";
}

bool ReportMissingIds(const DeadLetterFilter& filter,
                      const std::vector<DeadLetter>& selected,
                      const std::string& key) {
  const bool filtered = filter.lock || !filter.reason_glob.empty();
  bool missing = false;
  for (const std::string& id : filter.ids) {
    bool found = false;
    for (const DeadLetter& d : selected) found |= d.id == id;
    if (!found) {
      PrintError("no dead letter with job id " + Quoted(id) +
                 (filtered ? " that --reason/--lock select" : "") + " in " +
                 key);
      missing = true;
    }
  }
  return missing;
}

}  // namespace lockfleet::cli
