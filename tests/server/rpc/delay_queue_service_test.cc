// DelayQueueService over real gRPC on loopback, in process, so that the store
// under it can stall: a write that hangs in the store (a RocksDB write stall,
// a key lock held through a slow fsync) must never hold one of gRPC's
// threads (its polling thread), so every other rpc keeps answering. (Unary
// Schedules share one writer, the CommitQueue's: a stalled one holds those
// queued behind it, as RocksDB's writers all wait behind its write leader.)
#include "server/rpc/delay_queue_service.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/core/job_service.h"
#include "server/jobs/limits.h"
#include "server/metrics/rpc_metrics.h"
#include "server/timer/clock.h"
#include "storage/forwarding_job_store.h"
#include "storage/in_memory_job_store.h"
#include "storage/job_store.h"
#include "tests/support/poll.h"
#include "tests/support/rpc_deadline.h"

namespace delayd::server {
namespace {

using ::delayd::testing::PollUntil;
using ::delayd::testing::SetDeadline;
using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

constexpr char kStalled[] = "stalled";
constexpr absl::Duration kWait = absl::Seconds(10);

// Passes everything through to an InMemoryJobStore, except that while armed
// an Apply that writes topic kStalled blocks until Release(), and that the
// next RefuseNoStall(n) writes made with Durability::kSyncNoStall are
// refused as if they would stall.
class StallingStore final : public storage::ForwardingJobStore {
 public:
  StallingStore() : ForwardingJobStore(memory_) {}

  void Stall() {
    absl::MutexLock lock(&mu_);
    stalling_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    stalling_ = false;
  }
  int stalled() {
    absl::MutexLock lock(&mu_);
    return stalled_;
  }
  void RefuseNoStall(int n) {
    absl::MutexLock lock(&mu_);
    refusals_ = n;
  }
  int refusals_left() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override {
    if (durability == storage::Durability::kSyncNoStall) {
      absl::MutexLock lock(&mu_);
      if (refusals_ > 0) {
        --refusals_;
        return storage::WouldStallError();
      }
    }
    bool stall = false;
    for (const storage::Mutation& m : mutations) {
      stall = stall || m.topic() == kStalled;
    }
    if (stall) {
      absl::MutexLock lock(&mu_);
      ++stalled_;
      mu_.Await(absl::Condition(
          +[](bool* stalling) { return !*stalling; }, &stalling_));
      --stalled_;
    }
    return ForwardingJobStore::Apply(mutations, durability);
  }

 private:
  // Constructed after the base, which only keeps a reference to it.
  storage::InMemoryJobStore memory_;
  absl::Mutex mu_;
  bool stalling_ ABSL_GUARDED_BY(mu_) = false;
  int stalled_ ABSL_GUARDED_BY(mu_) = 0;
  int refusals_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::ScheduleRequest ScheduleReq(const std::string& topic, const std::string& id,
                                absl::Duration delay) {
  v1::ScheduleRequest req;
  req.mutable_job()->set_topic(topic);
  req.mutable_job()->set_id(id);
  *req.mutable_job()->mutable_delay() = ToProto(delay);
  return req;
}

class DelayQueueServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    jobs_ = std::make_unique<JobService>(&store_, &clock_, Limits{});
    jobs_->SetInlineWrites(inline_writes_);
    ASSERT_TRUE(jobs_->Recover().ok());
    jobs_->Start();
    service_ = std::make_unique<DelayQueueService>(jobs_.get(), &rpc_metrics_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    // As delayd: no other process's server on the same port (SO_REUSEPORT).
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    service_->Register(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    service_->Start();
    service_->StartServing();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::DelayQueue::NewStub(channel_);
  }

  void TearDown() override {
    store_.Release();
    for (std::thread& t : callers_) t.join();
    service_->StartDraining();
    if (server_ != nullptr) server_->Shutdown();
    service_.reset();
    jobs_.reset();
  }

  // Starts `n` calls that schedule a job of topic kStalled, each on its own
  // thread, and counts the ones that end OK. kSchedule: unary Schedules,
  // whose writes share the CommitQueue's thread; kBatch: ScheduleBatch, one
  // job each, each written on a write worker.
  enum class Path { kSchedule, kBatch };
  void StartStalledSchedules(int n, Path path) {
    for (int i = 0; i < n; ++i) {
      callers_.emplace_back([this, i, path] {
        grpc::ClientContext context;
        SetDeadline(context, absl::Seconds(60));
        const v1::ScheduleRequest req =
            ScheduleReq(kStalled, absl::StrCat("s", i), absl::Hours(1));
        grpc::Status s;
        if (path == Path::kSchedule) {
          v1::ScheduleResponse reply;
          s = stub_->Schedule(&context, req, &reply);
        } else {
          v1::ScheduleBatchRequest batch;
          *batch.add_requests() = req;
          v1::ScheduleBatchResponse reply;
          s = stub_->ScheduleBatch(&context, batch, &reply);
        }
        if (s.ok()) ++stalled_ok_;
      });
    }
  }

  // Schedules one job with ScheduleBatch, which a write worker writes: a
  // unary Schedule would queue behind the stalled one on the CommitQueue,
  // as with RocksDB, whose writers all queue behind its write leader.
  void MustScheduleOnAWorker(const std::string& topic, const std::string& id,
                             absl::Duration delay) {
    grpc::ClientContext context;
    SetDeadline(context, kWait);
    v1::ScheduleBatchRequest batch;
    *batch.add_requests() = ScheduleReq(topic, id, delay);
    v1::ScheduleBatchResponse reply;
    const grpc::Status s = stub_->ScheduleBatch(&context, batch, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The rpcs that must answer while writes of kStalled hang: reads, writes
  // of other topics on the write workers, and a delivery and its ack.
  void ExpectOtherRpcsAnswer() {
    MustScheduleOnAWorker("free", "later", absl::Hours(1));
    {
      grpc::ClientContext context;
      SetDeadline(context, kWait);
      v1::GetJobRequest req;
      req.mutable_key()->set_topic("free");
      req.mutable_key()->set_id("later");
      v1::Job reply;
      const grpc::Status s = stub_->GetJob(&context, req, &reply);
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    {
      grpc::ClientContext context;
      SetDeadline(context, kWait);
      v1::ListJobsRequest req;
      req.set_topic("free");
      v1::ListJobsResponse reply;
      EXPECT_TRUE(stub_->ListJobs(&context, req, &reply).ok());
    }
    {
      grpc::ClientContext context;
      SetDeadline(context, kWait);
      v1::GetStatsResponse reply;
      EXPECT_TRUE(
          stub_->GetStats(&context, v1::GetStatsRequest(), &reply).ok());
    }
    // A job of another topic is delivered and acked.
    MustScheduleOnAWorker("free", "now", absl::ZeroDuration());
    grpc::ClientContext stream_context;
    SetDeadline(stream_context, kWait);
    v1::SubscribeRequest sub;
    sub.set_topic("free");
    std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> stream =
        stub_->Subscribe(&stream_context, sub);
    v1::SubscribeResponse message;
    ASSERT_TRUE(stream->Read(&message));
    ASSERT_EQ(message.deliveries_size(), 1);
    const v1::Delivery& delivery = message.deliveries(0);
    EXPECT_EQ(delivery.job().id(), "now");
    grpc::ClientContext ack_context;
    SetDeadline(ack_context, kWait);
    v1::AckRequest ack;
    ack.add_ack_tokens(delivery.ack_token());
    v1::AckResponse ack_reply;
    const grpc::Status acked = stub_->Ack(&ack_context, ack, &ack_reply);
    EXPECT_TRUE(acked.ok()) << acked.error_message();
    ASSERT_EQ(ack_reply.results_size(), 1);
    EXPECT_EQ(ack_reply.results(0).code(), 0) << ack_reply.results(0).message();
    stream_context.TryCancel();
  }

  bool inline_writes_ = false;  // as --sync=none; set before SetUp
  StallingStore store_;
  timer::SystemClock clock_;
  prometheus::Registry registry_;
  RpcMetrics rpc_metrics_{registry_};
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<DelayQueueService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
  std::vector<std::thread> callers_;
  std::atomic<int> stalled_ok_{0};
};

// A few stalled Schedules: the first waits in the store on the
// CommitQueue's thread, the rest queue behind it, none on a gRPC thread, and
// none is answered before its write.
TEST_F(DelayQueueServiceTest, StalledWritesLeaveOtherRpcsAnswering) {
  store_.Stall();
  StartStalledSchedules(8, Path::kSchedule);
  ASSERT_TRUE(PollUntil([&] { return store_.stalled() == 1; }, kWait))
      << store_.stalled() << " stalled writes reached the store";
  ExpectOtherRpcsAnswer();
  EXPECT_EQ(stalled_ok_, 0);
  store_.Release();
  for (std::thread& t : callers_) t.join();
  callers_.clear();
  EXPECT_EQ(stalled_ok_, 8);
}

// More stalled writes than write workers: the writes queue, and reads and
// acks, which have workers of their own, still answer.
TEST_F(DelayQueueServiceTest, ReadsAndAcksAnswerWhenEveryWriterIsStalled) {
  store_.Stall();
  StartStalledSchedules(40, Path::kBatch);
  ASSERT_TRUE(PollUntil([&] { return store_.stalled() >= 8; }, kWait))
      << store_.stalled() << " stalled writes reached the store";
  {
    grpc::ClientContext context;
    SetDeadline(context, kWait);
    v1::GetStatsResponse reply;
    const grpc::Status s =
        stub_->GetStats(&context, v1::GetStatsRequest(), &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext context;
    SetDeadline(context, kWait);
    v1::GetJobRequest req;
    req.mutable_key()->set_topic(kStalled);
    req.mutable_key()->set_id("s0");
    v1::Job reply;
    const grpc::Status s = stub_->GetJob(&context, req, &reply);
    // Not written yet: its write is stalled.
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  EXPECT_EQ(stalled_ok_, 0);
  store_.Release();
  for (std::thread& t : callers_) t.join();
  callers_.clear();
  EXPECT_EQ(stalled_ok_, 40);
}

// Health is served beside the job API, on the same completion queue: the
// server and the job API by name, nothing else.
TEST_F(DelayQueueServiceTest, HealthChecksTheServerAndTheJobApiOnly) {
  std::unique_ptr<Health::Stub> health = Health::NewStub(channel_);
  for (const std::string name : {"", "delayd.v1.DelayQueue"}) {
    grpc::ClientContext context;
    SetDeadline(context, kWait);
    HealthCheckRequest req;
    req.set_service(name);
    HealthCheckResponse reply;
    const grpc::Status s = health->Check(&context, req, &reply);
    ASSERT_TRUE(s.ok()) << name << ": " << s.error_message();
    EXPECT_EQ(reply.status(), HealthCheckResponse::SERVING) << name;
  }
  grpc::ClientContext context;
  SetDeadline(context, kWait);
  HealthCheckRequest req;
  req.set_service("delayd.v1.Nothing");
  HealthCheckResponse reply;
  EXPECT_EQ(health->Check(&context, req, &reply).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// A Watch sees SERVING, then NOT_SERVING when the server drains, and then
// ends UNAVAILABLE; a Check then answers NOT_SERVING. A Watch of an unknown
// name sees SERVICE_UNKNOWN.
TEST_F(DelayQueueServiceTest, HealthWatchSeesTheDrainAndEnds) {
  std::unique_ptr<Health::Stub> health = Health::NewStub(channel_);
  {
    grpc::ClientContext context;
    SetDeadline(context, kWait);
    HealthCheckRequest req;
    req.set_service("delayd.v1.Nothing");
    auto watch = health->Watch(&context, req);
    HealthCheckResponse status;
    ASSERT_TRUE(watch->Read(&status));
    EXPECT_EQ(status.status(), HealthCheckResponse::SERVICE_UNKNOWN);
    context.TryCancel();
    while (watch->Read(&status)) {
    }
    EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  grpc::ClientContext context;
  SetDeadline(context, kWait);
  auto watch = health->Watch(&context, HealthCheckRequest());
  HealthCheckResponse status;
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::SERVING);
  service_->StartDraining();
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&status));
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  grpc::ClientContext check_context;
  SetDeadline(check_context, kWait);
  HealthCheckResponse reply;
  ASSERT_TRUE(health->Check(&check_context, HealthCheckRequest(), &reply).ok());
  EXPECT_EQ(reply.status(), HealthCheckResponse::NOT_SERVING);
}

// As delayd under --sync=none: writes on the polling thread.
class DelayQueueServiceInlineTest : public DelayQueueServiceTest {
 protected:
  DelayQueueServiceInlineTest() { inline_writes_ = true; }
};

// Under --sync=none a ScheduleStream's requests run on the polling thread,
// their writes gathered. When the gathered write would stall, the commit
// queue writes those requests instead and its thread answers them, then
// starts the stream's next batch: every request is still answered, in
// order, each as its unary rpc would be.
TEST_F(DelayQueueServiceInlineTest, AStreamWhoseGatheredWriteWouldStallGoesOn) {
  store_.RefuseNoStall(1);
  grpc::ClientContext context;
  SetDeadline(context, kWait);
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScheduleStreamRequest,
                                           v1::ScheduleStreamResponse>>
      stream = stub_->ScheduleStream(&context);
  for (int m = 0; m < 3; ++m) {
    v1::ScheduleStreamRequest message;
    for (int i = 0; i < 3; ++i) {
      *message.add_requests()->mutable_schedule() =
          ScheduleReq("t", absl::StrCat("s", 3 * m + i), absl::Hours(1));
    }
    ASSERT_TRUE(stream->Write(message));
  }
  v1::ScheduleStreamRequest last;
  v1::CancelRequest* cancel = last.add_requests()->mutable_cancel();
  cancel->mutable_key()->set_topic("t");
  cancel->mutable_key()->set_id("s0");
  *last.add_requests()->mutable_schedule() =
      ScheduleReq("t", "s1", absl::Hours(2));  // a duplicate id
  ASSERT_TRUE(stream->Write(last));
  ASSERT_TRUE(stream->WritesDone());
  std::vector<v1::StreamAnswer> answers;
  v1::ScheduleStreamResponse response;
  while (stream->Read(&response)) {
    for (const v1::StreamAnswer& a : response.answers()) answers.push_back(a);
  }
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 11u);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(answers[i].code(), 0) << i << ": " << answers[i].message();
    EXPECT_EQ(answers[i].schedule().job().id(), absl::StrCat("s", i));
    EXPECT_TRUE(answers[i].schedule().created()) << i;
  }
  EXPECT_EQ(answers[9].code(), 0) << answers[9].message();
  EXPECT_EQ(answers[9].cancel().outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(answers[10].code(), grpc::StatusCode::ALREADY_EXISTS)
      << answers[10].message();
  EXPECT_EQ(store_.refusals_left(), 0);
  EXPECT_GE(jobs_->commits().writes(), 1);
  for (int i = 0; i < 9; ++i) {
    grpc::ClientContext get_context;
    SetDeadline(get_context, kWait);
    v1::GetJobRequest get;
    get.mutable_key()->set_topic("t");
    get.mutable_key()->set_id(absl::StrCat("s", i));
    v1::Job job;
    EXPECT_EQ(stub_->GetJob(&get_context, get, &job).error_code(),
              i == 0 ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::OK)
        << i;
  }
}

}  // namespace
}  // namespace delayd::server
