// Thread-safety annotations, checked by clang's -Wthread-safety analysis.
//
// They name the lock that guards each field and the locks a function needs,
// so a missing lock is a compile error in the clang build CI runs
// (scripts/check_sanitized.sh, -Werror=thread-safety) instead of a comment
// nobody checks. Under other compilers they expand to nothing. Use them with
// galley::Mutex (galley/mutex.h): std::mutex carries no annotations in
// libstdc++, so locking one is invisible to the analysis.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void AddLocked(int n) REQUIRES(mu_);
//   void Add(int n) EXCLUDES(mu_);
//
// The macro names follow clang's documentation
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
#ifndef GALLEY_THREAD_ANNOTATIONS_H_
#define GALLEY_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define GALLEY_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define GALLEY_THREAD_ANNOTATION_(x)
#endif

// A class whose instances are locks ("mutex" in diagnostics).
#define CAPABILITY(name) GALLEY_THREAD_ANNOTATION_(capability(name))
// An RAII class that holds a lock for its lifetime.
#define SCOPED_CAPABILITY GALLEY_THREAD_ANNOTATION_(scoped_lockable)

// Data members: read and written only with the lock held (shared suffices to
// read). PT_GUARDED_BY guards what a pointer points to.
#define GUARDED_BY(x) GALLEY_THREAD_ANNOTATION_(guarded_by(x))
#define PT_GUARDED_BY(x) GALLEY_THREAD_ANNOTATION_(pt_guarded_by(x))

// Lock order: this lock is taken before / after the named ones.
#define ACQUIRED_BEFORE(...) GALLEY_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) GALLEY_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))

// Functions: the caller must hold (exclusively / shared) the named locks.
#define REQUIRES(...) GALLEY_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) GALLEY_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))

// Functions that take or drop a lock and return with it held / released.
#define ACQUIRE(...) GALLEY_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) GALLEY_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) GALLEY_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) GALLEY_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) GALLEY_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
// The lock is held when the function returns the given value.
#define TRY_ACQUIRE(...) GALLEY_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) \
  GALLEY_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))

// The caller must NOT hold the named locks (the function takes them itself);
// catches the self-deadlock of locking a non-recursive mutex twice.
#define EXCLUDES(...) GALLEY_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// Tells the analysis the lock is held here (checked at run time by the lock).
#define ASSERT_CAPABILITY(x) GALLEY_THREAD_ANNOTATION_(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) GALLEY_THREAD_ANNOTATION_(assert_shared_capability(x))
// The function returns a reference to the named lock.
#define RETURN_CAPABILITY(x) GALLEY_THREAD_ANNOTATION_(lock_returned(x))

// Turns the analysis off for one function. Every use says, in a comment, why
// the analysis cannot follow it.
#define NO_THREAD_SAFETY_ANALYSIS GALLEY_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // GALLEY_THREAD_ANNOTATIONS_H_
