// A program of one floor's library, linked whole, and the floors below it only
// (tests/link/meson.build): that it links is the check.
int main() { return 0; }
