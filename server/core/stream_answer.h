// SetStreamAnswer: a unary rpc's result as a ScheduleStream answer (the
// response in `field`, or the code and message). Shared by JobWriter::Stream
// and the stream reactor's requests run through the Async calls, so both
// answer alike.
#ifndef DELAYD_SERVER_CORE_STREAM_ANSWER_H_
#define DELAYD_SERVER_CORE_STREAM_ANSWER_H_

#include <string>

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"

namespace delayd::server {

template <typename Response>
void SetStreamAnswer(v1::StreamAnswer& answer, absl::StatusOr<Response> result,
                     Response* (v1::StreamAnswer::*field)()) {
  if (result.ok()) {
    (answer.*field)()->Swap(&*result);
    return;
  }
  answer.set_code(static_cast<int>(result.status().code()));
  answer.set_message(std::string(result.status().message()));
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_STREAM_ANSWER_H_
