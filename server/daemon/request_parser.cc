#include "galley/daemon/request_parser.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "wire/messages.h"

namespace galley {

RequestParser::RequestParser() : thread_([this] { Loop(); }) {}

RequestParser::~RequestParser() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.SignalAll();
  thread_.join();
}

Result<JobSpec> RequestParser::ParseJobSpec(std::string_view payload) {
  Result<JobSpec> spec = Status::Internal("the request was not parsed");
  bool done = false;
  {
    MutexLock lock(&mu_);
    queue_.push_back([&] {
      // Thread boundary: a parse that throws fails its own request only.
      try {
        auto body = wire::ParseObject(payload);
        spec = body.ok() ? wire::JobSpecFromJson(*body) : Result<JobSpec>(body.status());
      } catch (const std::exception& e) {
        spec = Status::Internal(std::string("parsing the request failed: ") + e.what());
      }
      MutexLock done_lock(&mu_);
      done = true;
    });
  }
  changed_.SignalAll();
  MutexLock lock(&mu_);
  while (!done) changed_.Wait(&mu_);
  return spec;
}

void RequestParser::Loop() {
  while (true) {
    std::function<void()> work;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) changed_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping, nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
    changed_.SignalAll();
  }
}

}  // namespace galley
