// The web console's files (server/http/console/), compiled into the binary
// at build time (cmake/embed_files.cmake): the console needs no files at
// run time, no CDN and no network. Served by HttpServer: index.html at "/",
// the others at "/console/<name>".
#ifndef DELAYD_SERVER_HTTP_CONSOLE_FILES_H_
#define DELAYD_SERVER_HTTP_CONSOLE_FILES_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace delayd::server {

struct EmbeddedFile {
  absl::string_view name;  // "app.js"
  absl::string_view bytes;
};

// Every console file; defined in the generated console_files.cc.
const std::vector<EmbeddedFile>& EmbeddedFiles();

// The file called `name`, or nullptr.
inline const EmbeddedFile* FindEmbeddedFile(absl::string_view name) {
  for (const EmbeddedFile& f : EmbeddedFiles()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_HTTP_CONSOLE_FILES_H_
