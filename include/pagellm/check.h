// CHECK macros for programmer errors: print file:line and a message, then abort.
// Never use CHECK for anything a user, a request or a file can cause; return a Status instead.
#pragma once

#include <sstream>

namespace pagellm::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : Voidify() & stream << ...` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace pagellm::internal

#define CHECK(cond)                         \
  (cond) ? (void)0                          \
         : ::pagellm::internal::Voidify() & \
               ::pagellm::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define CHECK_EQ(a, b) CHECK((a) == (b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_NE(a, b) CHECK((a) != (b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_LT(a, b) CHECK((a) < (b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_LE(a, b) CHECK((a) <= (b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_GT(a, b) CHECK((a) > (b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_GE(a, b) CHECK((a) >= (b)) << "(" << (a) << " vs " << (b) << ") "

#ifdef NDEBUG
#define DCHECK(cond) \
  while (false) CHECK(cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
