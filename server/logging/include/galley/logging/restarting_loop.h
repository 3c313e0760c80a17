// RunRestartingLoop: the thread boundary of galleyd's long-lived worker
// threads (scheduler, cache planner). An exception escaping the loop is
// logged and the loop started again after a pause, instead of reaching
// std::terminate and taking every job on the node down with it.
//
// Called on the worker thread itself; returns when `loop` returns normally.
#ifndef GALLEY_SERVER_LOGGING_RESTARTING_LOOP_H_
#define GALLEY_SERVER_LOGGING_RESTARTING_LOOP_H_

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <thread>

namespace galley {

template <typename Loop>
void RunRestartingLoop(const char* name, Loop&& loop) {
  while (true) {
    try {
      loop();
      return;
    } catch (const std::exception& e) {
      spdlog::error("{} loop: {}; restarting it", name, e.what());
    } catch (...) {
      spdlog::error("{} loop: unknown exception; restarting it", name);
    }
    // A fault that recurs at once must not turn into a busy loop.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace galley

#endif  // GALLEY_SERVER_LOGGING_RESTARTING_LOOP_H_
