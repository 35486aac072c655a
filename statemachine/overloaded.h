// Overloaded{lambdas...}: a visitor for std::visit built from lambdas, one per type.
#pragma once

namespace dugong {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace dugong
