// Quorum mode's takeover report (driver/reports.h): the state machine's PublishReport
// carried out through the coordinator, its answer stepped back as ReportPublished.
#include "driver/core.h"

namespace dugong::driver {

void Core::publishReport(std::optional<TakeoverReport> report) {
  // A withdrawn peer has left the coordinator: its election node, and any report in it,
  // went with its session; nothing can be published until it joins again.
  if (health_.withdrawn()) {
    return later(ReportPublished{false, "not connected to ZooKeeper (withdrawn)", -1});
  }
  reports_.inFlight_ = true;
  reports_.publishing_ = report.has_value();
  emit(cmd::PublishReport{std::move(report)});
}

void Core::onReportPublished(const ReportPublished& r) {
  if (reports_.inFlight_) {
    reports_.inFlight_ = false;
    // A failure leaves the node holding either: a report may stand.
    reports_.mayStand_ = r.ok ? reports_.publishing_ : reports_.mayStand_ || reports_.publishing_;
  }
  step(r);
}

}  // namespace dugong::driver
