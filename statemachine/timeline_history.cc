#include "statemachine/timeline_history.h"

namespace dugong {

int64_t TimelineHistory::timelineAt(WalPosition p) const {
  if (p.value() == 0) return 0;
  for (const auto& a : ancestors) {
    if (p <= a.end) return a.timeline;  // the byte before p lies before a's end
  }
  return timeline;
}

std::string TimelineHistory::describe() const {
  std::string out = "timeline " + std::to_string(timeline);
  std::string from;
  for (auto a = ancestors.rbegin(); a != ancestors.rend(); ++a) {
    from += (from.empty() ? "" : ", ") + std::string("from ") + std::to_string(a->timeline) + " at " +
            a->end.toString();
  }
  return from.empty() ? out : out + " (" + from + ")";
}

}  // namespace dugong
