// The job record format and the handler registry (no servers).
#include "lockfleet/worker/job.h"

#include <gtest/gtest.h>

#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/handler.h"

namespace lockfleet::worker {
namespace {

using config::Scalar;

std::string ParseError(std::string_view text) {
  try {
    ParseJob(text);
  } catch (const JobError& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(JobTest, ParsesAFullRecord) {
  const Job job = ParseJob(
      R"({"id":"o-1","lock":"product:7","type":"inventory.purchase",)"
      R"("payload":{"buyer":"alice","qty":2,"price":1.5,"vip":true},"extra":1})");
  EXPECT_EQ(job.id, "o-1");
  EXPECT_EQ(job.lock, "product:7");
  EXPECT_EQ(job.type, "inventory.purchase");
  EXPECT_EQ(job.payload.at("buyer"), (Scalar{Scalar::Type::kString, "alice"}));
  EXPECT_EQ(job.payload.at("qty"), (Scalar{Scalar::Type::kInteger, "2"}));
  EXPECT_EQ(job.payload.at("price").type, Scalar::Type::kNumber);
  EXPECT_EQ(job.payload.at("vip"), (Scalar{Scalar::Type::kBool, "true"}));
}

TEST(JobTest, PayloadIsOptional) {
  const Job job = ParseJob(R"({"id":"a","lock":"l","type":"sleep"})");
  EXPECT_TRUE(job.payload.empty());
}

TEST(JobTest, RejectsMalformedRecordsNamingTheField) {
  EXPECT_EQ(ParseError("not json"), "not JSON");
  EXPECT_EQ(ParseError("[1]"), "expected a JSON object, found array");
  EXPECT_EQ(ParseError(R"({"lock":"l","type":"t"})"), "field 'id': missing");
  EXPECT_EQ(ParseError(R"({"id":7,"lock":"l","type":"t"})"),
            "field 'id': expected a string, found number");
  EXPECT_EQ(ParseError(R"({"id":"a","lock":"","type":"t"})"),
            "field 'lock': expected a non-empty string");
  EXPECT_EQ(ParseError(R"({"id":"a","lock":"}x","type":"t"})"),
            "field 'lock': must not start with '}'");
  EXPECT_EQ(ParseError(R"({"id":"a","lock":"l","type":"t","payload":[]})"),
            "field 'payload': expected an object, found array");
  EXPECT_EQ(
      ParseError(R"({"id":"a","lock":"l","type":"t","payload":{"x":{}}})"),
      "payload field 'x': expected a string, number or boolean, found object");
  EXPECT_EQ(ParseError(R"({"id":")" + std::string(257, 'x') +
                       R"(","lock":"l","type":"t"})"),
            "field 'id': longer than 256 bytes");
}

TEST(JobTest, EncodeRoundTrips) {
  Job job{.id = "j-1", .lock = "product:1", .type = "sleep"};
  job.payload["ms"] = {Scalar::Type::kInteger, "5"};
  job.payload["who"] = {Scalar::Type::kString, "bob \"b\""};
  job.payload["ok"] = {Scalar::Type::kBool, "false"};
  EXPECT_EQ(ParseJob(EncodeJob(job)), job);
}

TEST(JobTest, ALimitIsParsedCheckedAndEncoded) {
  Job job = ParseJob(
      R"({"id":"a","lock":"l","type":"t","limit":{"name":"api","permits":3}})");
  ASSERT_TRUE(job.limit.has_value());
  EXPECT_EQ(*job.limit,
            (config::LimitConfig{.name = "api", .permits = 3, .take = 1}));
  job.limit->take = 2;
  EXPECT_EQ(ParseJob(EncodeJob(job)), job);
  const std::string head = R"({"id":"a","lock":"l","type":"t","limit":)";
  EXPECT_EQ(ParseError(head + "3}"),
            "field 'limit': expected an object, found number");
  EXPECT_EQ(ParseError(head + R"({"permits":3}})"),
            "field 'limit.name': missing");
  EXPECT_EQ(ParseError(head + R"({"name":"}x","permits":3}})"),
            "field 'limit.name': must not start with '}'");
  EXPECT_EQ(ParseError(head + R"({"name":"x"}})"),
            "field 'limit.permits': missing");
  EXPECT_EQ(ParseError(head + R"({"name":"x","permits":0}})"),
            "field 'limit.permits': expected an integer 1..1000000, found 0");
  EXPECT_EQ(ParseError(head + R"({"name":"x","permits":"3"}})"),
            "field 'limit.permits': expected an integer 1..1000000, found "
            "\"3\"");
  EXPECT_EQ(ParseError(head + R"({"name":"x","permits":2,"take":3}})"),
            "field 'limit.take': 3 is more than the limit's 2 permits");
  EXPECT_EQ(ParseError(head + R"({"name":"x","permits":2,"taek":1}})"),
            "field 'limit.taek': unknown (a limit has name, permits and take)");
  job.limit->take = 5;
  EXPECT_THROW(EncodeJob(job), JobError);
}

TEST(JobTest, ALockModeIsParsedCheckedAndEncoded) {
  const Job plain = ParseJob(R"({"id":"a","lock":"l","type":"t"})");
  EXPECT_FALSE(plain.lock_mode.has_value()) << "the plain lock by default";
  EXPECT_EQ(EncodeJob(plain).find("lock_mode"), std::string::npos);
  Job job = ParseJob(R"({"id":"a","lock":"l","type":"t","lock_mode":"read"})");
  EXPECT_EQ(job.lock_mode, config::LockMode::kRead);
  EXPECT_EQ(ParseJob(EncodeJob(job)), job);
  job.lock_mode = config::LockMode::kWrite;
  EXPECT_NE(EncodeJob(job).find(R"("lock_mode":"write")"), std::string::npos);
  EXPECT_EQ(ParseJob(EncodeJob(job)), job);
  const std::string head = R"({"id":"a","lock":"l","type":"t","lock_mode":)";
  const std::string expected =
      "field 'lock_mode': expected \"read\" or \"write\" (or no lock_mode "
      "for the plain lock), found ";
  EXPECT_EQ(ParseError(head + R"("sideways"})"), expected + "\"sideways\"");
  EXPECT_EQ(ParseError(head + R"("READ"})"), expected + "\"READ\"");
  EXPECT_EQ(ParseError(head + R"(""})"), expected + "\"\"");
  EXPECT_EQ(ParseError(head + "null}"), expected + "null");
  EXPECT_EQ(ParseError(head + "1}"), expected + "1");
  EXPECT_EQ(ParseError(head + R"(["read"]})"), expected + "[\"read\"]");
  const std::string huge =
      ParseError(head + "\"" + std::string(5000, 'x') + "\"}");
  EXPECT_LT(huge.size(), 256u) << "a bad value is shown cut short";
}

TEST(JobTest, EncodeRefusesWhatParseWouldRefuse) {
  EXPECT_THROW(EncodeJob(Job{.id = "", .lock = "l", .type = "t"}), JobError);
  EXPECT_THROW(EncodeJob(Job{.id = "a", .lock = "l", .type = ""}), JobError);
}

TEST(JobTest, TypedReads) {
  Settings s{{"n", {Scalar::Type::kInteger, "42"}},
             {"q", {Scalar::Type::kString, "7"}},
             {"b", {Scalar::Type::kBool, "true"}},
             {"s", {Scalar::Type::kString, "text"}}};
  EXPECT_EQ(GetInt(s, "n"), 42);
  EXPECT_EQ(GetInt(s, "q"), 7);  // a quoted number
  EXPECT_EQ(GetBool(s, "b"), true);
  EXPECT_EQ(GetString(s, "n"), "42");
  EXPECT_EQ(GetInt(s, "missing"), std::nullopt);
  EXPECT_THROW(GetInt(s, "s"), JobError);
  EXPECT_THROW(GetInt(s, "b"), JobError);
  EXPECT_THROW(GetBool(s, "s"), JobError);
}

TEST(HandlerRegistryTest, RegistersAndFinds) {
  HandlerRegistry registry;
  RegisterBuiltinHandlers(registry);
  EXPECT_NE(registry.Find("inventory.purchase"), nullptr);
  EXPECT_NE(registry.Find("sleep"), nullptr);
  EXPECT_EQ(registry.Find("nope"), nullptr);
  EXPECT_THROW(
      registry.Register("sleep",
                        {.run = [](JobContext&) { return JobResult::kOk; }}),
      std::invalid_argument);
  EXPECT_THROW(registry.Register("x", {}), std::invalid_argument);
}

TEST(HandlerRegistryTest, ValidatesConfiguredSettings) {
  HandlerRegistry registry;
  RegisterBuiltinHandlers(registry);
  const std::map<std::string, Settings> configured = {
      {"sleep",
       {{"default_ms", {Scalar::Type::kInteger, "5"}},
        {"defalt_ms", {Scalar::Type::kInteger, "5"}}}},
      {"emial.send", {}}};
  const std::vector<std::string> problems = registry.Validate(configured);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "worker.handlers.emial.send: no such handler (registered: "
            "inventory.purchase, sleep)");
  EXPECT_EQ(problems[1],
            "worker.handlers.sleep.defalt_ms: unknown setting (known: "
            "default_ms)");
}

TEST(JobResultTest, Names) {
  EXPECT_STREQ(JobResultName(JobResult::kDuplicate), "duplicate");
  EXPECT_STREQ(JobSourceName(JobSource::kSchedule), "schedule");
}

}  // namespace
}  // namespace lockfleet::worker
