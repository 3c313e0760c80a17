// RequestParser: parses the large requests of every connection (OpenJob
// bodies over 64 KiB: long lists of ids, a resume bitmap), one at a time, on
// a thread of its own.
//
// Why a thread: a parsed request costs several times its text while it is
// parsed (nlohmann's lexer keeps two growing copies of a long string, and a
// document holds 16 bytes or more per value), and glibc never returns the
// freed top of a thread's own arena to the system (malloc_trim trims only
// the main arena's), so parses spread over many connection threads would
// each leave their arena grown. On one thread they reuse one arena: a burst
// of large requests leaves at most what the largest one took behind, not
// that times the connections. One at a time also bounds the documents
// alive at once to one (at most wire::kMaxParsedBytes, which the caller
// checks with wire::MeasureJson before it queues a request).
//
// Thread-safety: Parse may be called from any thread; requests are parsed
// in the order they arrive. Destruction waits for the request in progress.
#ifndef GALLEY_SERVER_DAEMON_REQUEST_PARSER_H_
#define GALLEY_SERVER_DAEMON_REQUEST_PARSER_H_

#include <deque>
#include <functional>
#include <string_view>
#include <thread>

#include "galley/job_spec.h"
#include "galley/mutex.h"
#include "galley/status.h"

namespace galley {

class RequestParser {
 public:
  RequestParser();
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // The OpenJob body `payload` as a JobSpec (wire::ParseObject, then
  // wire::JobSpecFromJson), parsed on the parser's thread; returns once it
  // is done.
  Result<JobSpec> ParseJobSpec(std::string_view payload) EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  Mutex mu_;
  CondVar changed_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace galley

#endif  // GALLEY_SERVER_DAEMON_REQUEST_PARSER_H_
