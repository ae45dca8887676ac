#include "storage/key_codec.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace delayd::storage {

std::string EncodeJobKey(std::string_view topic, std::string_view id) {
  std::string key;
  key.reserve(topic.size() + 1 + id.size());
  key.append(topic);
  key.push_back('\0');
  key.append(id);
  return key;
}

absl::StatusOr<JobKeyView> DecodeJobKey(std::string_view key) {
  const size_t sep = key.find('\0');
  if (sep == std::string_view::npos || sep == 0) {
    return absl::DataLossError(absl::StrCat("storage: malformed job key \"",
                                            PrintableKey(key),
                                            "\": expected topic \\000 id"));
  }
  return JobKeyView{key.substr(0, sep), key.substr(sep + 1)};
}

std::string EncodeDueTime(int64_t due_ms) {
  const auto v = static_cast<uint64_t>(ClampDueMs(due_ms));
  std::string out(kDueTimeBytes, '\0');
  for (size_t i = 0; i < kDueTimeBytes; ++i) {
    out[i] = static_cast<char>((v >> (8 * (kDueTimeBytes - 1 - i))) & 0xff);
  }
  return out;
}

std::string EncodeDueKey(int64_t due_ms, std::string_view topic,
                         std::string_view id) {
  std::string key = EncodeDueTime(due_ms);
  key.reserve(kDueTimeBytes + topic.size() + 1 + id.size());
  key.append(topic);
  key.push_back('\0');
  key.append(id);
  return key;
}

absl::StatusOr<DueKeyView> DecodeDueKey(std::string_view key) {
  if (key.size() <= kDueTimeBytes) {
    return absl::DataLossError(absl::StrCat("storage: malformed due key \"",
                                            PrintableKey(key),
                                            "\": shorter than 9 bytes"));
  }
  uint64_t v = 0;
  for (size_t i = 0; i < kDueTimeBytes; ++i) {
    v = (v << 8) | static_cast<unsigned char>(key[i]);
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::DataLossError(absl::StrCat("storage: malformed due key \"",
                                            PrintableKey(key),
                                            "\": due time above INT64_MAX"));
  }
  absl::StatusOr<JobKeyView> job = DecodeJobKey(key.substr(kDueTimeBytes));
  if (!job.ok()) {
    return absl::DataLossError(absl::StrCat("storage: malformed due key \"",
                                            PrintableKey(key),
                                            "\": ", job.status().message()));
  }
  return DueKeyView{static_cast<int64_t>(v), job->topic, job->id};
}

std::string EncodeCrowdKey(int64_t due_ms) {
  return absl::StrCat(kCrowdKeyPrefix, EncodeDueTime(due_ms));
}

absl::StatusOr<int64_t> DecodeCrowdKey(std::string_view key) {
  const std::string_view prefix(kCrowdKeyPrefix);
  uint64_t v = 0;
  if (key.size() == prefix.size() + kDueTimeBytes && key.starts_with(prefix)) {
    for (size_t i = prefix.size(); i < key.size(); ++i) {
      v = (v << 8) | static_cast<unsigned char>(key[i]);
    }
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(v);
    }
  }
  return absl::DataLossError(
      absl::StrCat("storage: malformed crowd key \"", PrintableKey(key), "\""));
}

namespace {

void AppendVarint(uint64_t v, std::string& out) {
  do {
    const auto low = static_cast<uint8_t>(v & 0x7f);
    v >>= 7;
    out.push_back(static_cast<char>(v == 0 ? low : (low | 0x80)));
  } while (v != 0);
}

// Reads one varint of at most `max` from the front of `in` and drops it;
// nullopt when `in` holds no such varint.
std::optional<uint64_t> TakeVarint(std::string_view& in, uint64_t max) {
  uint64_t v = 0;
  for (size_t i = 0; i < in.size() && i < 10; ++i) {
    const auto byte = static_cast<uint8_t>(in[i]);
    const uint64_t bits = byte & 0x7f;
    if (i == 9 && bits > 1) return std::nullopt;  // past 64 bits
    v |= bits << (7 * i);
    if ((byte & 0x80) == 0) {
      if (v > max) return std::nullopt;
      in.remove_prefix(i + 1);
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string EncodeDueValue(const DueValue& value) {
  std::string out;
  if (value.mark == 0 && value.payload_bytes == 0) return out;
  AppendVarint(value.mark, out);
  if (value.payload_bytes != 0) AppendVarint(value.payload_bytes, out);
  return out;
}

absl::StatusOr<DueValue> DecodeDueValue(std::string_view key,
                                        std::string_view value) {
  DueValue out;
  if (value.empty()) return out;
  std::string_view rest = value;
  const std::optional<uint64_t> mark =
      TakeVarint(rest, std::numeric_limits<uint32_t>::max());
  std::optional<uint64_t> bytes = 0;
  if (mark.has_value() && !rest.empty()) {
    bytes = TakeVarint(rest, std::numeric_limits<uint64_t>::max());
  }
  if (!mark.has_value() || !bytes.has_value() || !rest.empty()) {
    return absl::DataLossError(
        absl::StrCat("storage: due entry \"", PrintableKey(key),
                     "\": its value is not a mark and a payload size (",
                     value.size(), " bytes)"));
  }
  out.mark = static_cast<uint32_t>(*mark);
  out.payload_bytes = *bytes;
  return out;
}

std::string PrefixSuccessor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    const auto last = static_cast<unsigned char>(out.back());
    if (last != 0xff) {
      out.back() = static_cast<char>(last + 1);
      return out;
    }
    out.pop_back();
  }
  return out;
}

KeyRange JobScanRange(std::string_view topic, std::string_view id_prefix,
                      std::string_view start_after_id) {
  KeyRange range;
  range.begin = EncodeJobKey(topic, id_prefix);
  range.end = PrefixSuccessor(range.begin);
  if (!start_after_id.empty()) {
    // Ids hold no '\0', so `after '\0'` is the first key past `after`.
    std::string after = EncodeJobKey(topic, start_after_id);
    after.push_back('\0');
    if (after > range.begin) range.begin = std::move(after);
  }
  return range;
}

std::string PrintableKey(std::string_view key) {
  // Debian's absl has its own string_view, not std::string_view.
  return absl::CEscape(absl::string_view(key.data(), key.size()));
}

}  // namespace delayd::storage
