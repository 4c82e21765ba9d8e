#include "cli/commands.h"
#include "config/load_job_spec.h"

namespace sg {

JobSpec load_job_or_quickstart(const std::string& job_path, const std::vector<std::string>& sets) {
  if (job_path.empty()) return parse_job_spec(kQuickstartYaml, "<embedded quickstart>", sets);
  return load_job_spec(job_path, sets);
}

}  // namespace sg
