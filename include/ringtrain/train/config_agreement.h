// Which `ringtrain train` flags every rank must share, for the start-up
// agreement (DESIGN.md). A flag that changes what a rank does collectively or
// when (steps, evaluation, logging, checkpoints, replica and straggler checks,
// the sizes exchanged) and one that changes the arithmetic (so replicas would
// drift apart) must be the same on every rank: a difference is an error at
// start-up naming the flag, instead of a hang in a collective later.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ringtrain/sync/run_agreement.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain {

// One field per compared flag, named by the flag ("--max-steps"), with the
// value in its own form for the message.
std::vector<SignatureField> config_agreement_fields(const TrainConfig& cfg);

// The flags of TrainConfig that are not compared, each with the reason (a
// path that may differ per node, a rank's own watchdog, or compared in another
// form by the trainer). Every key of TrainConfig::to_json() is either compared
// or listed here: a test holds the two lists to that, so a new flag has to be
// placed in one of them.
const std::vector<std::pair<std::string, std::string>>& config_flags_not_compared();

// The flag a TrainConfig::to_json() key comes from ("max_steps" -> "--max-steps").
std::string config_key_flag(const std::string& key);

}  // namespace ringtrain
