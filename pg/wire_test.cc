#include "pg/wire.h"

#include <gtest/gtest.h>

namespace dugong::pg::wire {
namespace {

using namespace std::string_literals;

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

TEST(Wire, StartupMessageIsLengthVersionAndPairs) {
  const std::string m = startup({{"user", "u"}, {"database", "d"}});
  EXPECT_EQ(m, bytes({0, 0, 0, 27, 0, 3, 0, 0}) + "user\0u\0database\0d\0\0"s);
}

TEST(Wire, QueryPasswordAndSaslMessages) {
  EXPECT_EQ(query("SELECT 1"), std::string("Q") + bytes({0, 0, 0, 13}) + "SELECT 1\0"s);
  EXPECT_EQ(password("pw"), std::string("p") + bytes({0, 0, 0, 7}) + "pw\0"s);
  EXPECT_EQ(saslInitialResponse("SCRAM-SHA-256", "abc"),
            std::string("p") + bytes({0, 0, 0, 25}) + "SCRAM-SHA-256\0"s + bytes({0, 0, 0, 3}) + "abc");
  EXPECT_EQ(saslResponse("xy"), std::string("p") + bytes({0, 0, 0, 6}) + "xy");
  EXPECT_EQ(terminate(), std::string("X") + bytes({0, 0, 0, 4}));
  EXPECT_EQ(cancelRequest(0x01020304, -1),
            bytes({0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff}));
}

TEST(Wire, ReaderCutsMessagesAtAnyByteBoundary) {
  const std::string stream = std::string("R") + bytes({0, 0, 0, 8, 0, 0, 0, 0}) + "Z" + bytes({0, 0, 0, 5}) + "I";
  for (size_t step = 1; step <= stream.size(); ++step) {
    MessageReader r;
    std::vector<Message> got;
    for (size_t at = 0; at < stream.size(); at += step) {
      r.feed(std::string_view(stream).substr(at, step));
      while (true) {
        auto m = r.next();
        ASSERT_TRUE(m.ok()) << m.error();
        if (!m.value()) break;
        got.push_back(*m.value());
      }
    }
    ASSERT_EQ(got.size(), 2u) << "step " << step;
    EXPECT_EQ(got[0].type, 'R');
    EXPECT_EQ(got[0].body, bytes({0, 0, 0, 0}));
    EXPECT_EQ(got[1].type, 'Z');
    EXPECT_EQ(got[1].body, "I");
  }
}

TEST(Wire, ReaderRefusesABadLength) {
  MessageReader r;
  r.feed(std::string("E") + bytes({0, 0, 0, 3}));
  EXPECT_FALSE(r.next().ok());
  MessageReader huge;
  huge.feed(std::string("D") + bytes({0x7f, 0xff, 0xff, 0xff}));
  EXPECT_FALSE(huge.next().ok());
}

TEST(Wire, BodyCursorReadsFieldsAndNoticesAShortBody) {
  BodyCursor c(bytes({0, 2, 0xff, 0xff, 0xff, 0xfe}) + "name\0"s + "xyz");
  EXPECT_EQ(c.int16(), 2);
  EXPECT_EQ(c.int32(), -2);
  EXPECT_EQ(c.cstring(), "name");
  EXPECT_EQ(c.bytes(3), "xyz");
  EXPECT_FALSE(c.failed());
  EXPECT_EQ(c.int32(), 0);
  EXPECT_TRUE(c.failed());
  BodyCursor unterminated("abc");
  unterminated.cstring();
  EXPECT_TRUE(unterminated.failed());
}

TEST(Wire, ErrorResponseGivesSeverityMessageAndDetail) {
  const std::string body = "SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"x\"\0"s +
                           "Dsome detail\0\0"s;
  auto f = noticeFields(body);
  EXPECT_EQ(f['C'], "28P01");
  EXPECT_EQ(describeError(body), "FATAL:  password authentication failed for user \"x\" (DETAIL: some detail)");
  EXPECT_EQ(describeError("SERROR\0Mboom\0\0"s), "ERROR:  boom");
}

}  // namespace
}  // namespace dugong::pg::wire
