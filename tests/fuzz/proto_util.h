// What the fuzz targets over protobuf messages share (fuzz_util.h stays
// free of protobuf for the targets that do not link it).
#ifndef DELAYD_TESTS_FUZZ_PROTO_UTIL_H_
#define DELAYD_TESTS_FUZZ_PROTO_UTIL_H_

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message_lite.h"
#include "tests/fuzz/fuzz_util.h"

// Serialized with map entries in key order: equal messages, equal bytes.
inline std::string Deterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    FUZZ_CHECK(m.SerializeToCodedStream(&coded));
  }
  return out;
}

#endif  // DELAYD_TESTS_FUZZ_PROTO_UTIL_H_
