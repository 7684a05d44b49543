#include "pagellm/dtype.h"

namespace pagellm {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kI32:
      return "I32";
  }
  return "?";
}

}  // namespace pagellm
