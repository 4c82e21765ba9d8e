#pragma once
// Wall-clock durations as users write them for train.time_limit: seconds ("3600"), with a unit
// ("90s", "45m", "2h", "1.5d"), or Slurm's clock forms ("MM:SS", "HH:MM:SS", "D-HH:MM:SS").
#include <optional>
#include <string>

namespace sg {

// Seconds, or nullopt when `text` is none of the forms above (or negative).
std::optional<double> parse_duration_seconds(const std::string& text);

}  // namespace sg
