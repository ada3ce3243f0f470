#include <catch2/catch.hpp>

#include "ringtrain/core/nearest_name.h"

using namespace ringtrain;

TEST_CASE("nearest_name finds the typo's intended name") {
  const std::vector<std::string> commands = {"train", "eval",  "predict", "generate", "convert",
                                             "data",  "model", "weights", "bench",    "doctor"};
  CHECK(nearest_name("trian", commands) == "train");  // a transposition
  CHECK(nearest_name("tran", commands) == "train");   // a letter missing
  CHECK(nearest_name("predcit", commands) == "predict");
  CHECK(nearest_name("TRAIN", commands) == "train");                    // case
  CHECK(nearest_name("gen", commands) == "generate");                   // a prefix
  CHECK(nearest_name("rotate", {"rotation", "resize"}) == "rotation");  // another ending
  CHECK_FALSE(nearest_name("xyzzy", commands).has_value());
  CHECK_FALSE(nearest_name("", commands).has_value());
  CHECK_FALSE(nearest_name("train", {}).has_value());
}

TEST_CASE("nearest_name on flags and presets") {
  CHECK(nearest_name("--epoch", {"--epochs", "--eval-every", "--seed"}) == "--epochs");
  CHECK(nearest_name("--lr-schedule", {"--lr", "--schedule", "--lr-scaling"}) == "--schedule");
  const std::vector<std::string> presets = {"resnet18", "resnet34", "resnet50", "resnet101",
                                            "vgg16",    "gpt2",     "cnn"};
  CHECK(nearest_name("resnet51", presets) == "resnet50");
  CHECK(nearest_name("Resnet18", presets) == "resnet18");
  CHECK(nearest_name("vgg19", presets) == "vgg16");
  CHECK_FALSE(nearest_name("transformer", presets).has_value());
}

TEST_CASE("did_you_mean is a clause, or nothing") {
  CHECK(did_you_mean("trian", {"train", "eval"}) == " (did you mean 'train'?)");
  CHECK(did_you_mean("zzz", {"train", "eval"}).empty());
}
