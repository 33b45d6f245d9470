// The main() of a fuzz target built without libFuzzer (the normal test suite): runs
// LLVMFuzzerTestOneInput once on every file named, or found under a folder named, on
// the command line — the seed corpus and the inputs of every crash found — so that
// each stays a regression test in every build. Exits 0 iff every input ran (a broken
// invariant aborts) and at least one was found.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy of exactly the file's size, so that ASan sees a read past its end.
  std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        run_file(f);
        ++runs;
      }
    } else {
      run_file(arg);
      ++runs;
    }
  }
  std::cout << argv[0] << ": " << runs << " inputs ran\n";
  return runs > 0 ? 0 : 1;
}
