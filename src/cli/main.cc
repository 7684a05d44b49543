#include <cstdio>
int main() { std::puts("pagellm"); return 0; }
