// Package sampling picks the next token from a row of logits.
//
// The chain applied by Sample is, in this order:
//
//  1. penalties (repeat, frequency, presence) over the last RepeatLastN tokens
//     of history, modifying logits in place;
//  2. greedy short-cut: Temperature <= 0 or TopK == 1 returns the argmax
//     (lowest index on ties) without consuming randomness;
//  3. top-k on the penalised logits;
//  4. softmax of logits/Temperature over the survivors;
//  5. top-p (nucleus) on those tempered probabilities;
//  6. min-p relative to the most probable token, on the same probabilities;
//  7. one draw from the renormalised survivors.
//
// This is the order of HF transformers and ollama's Go sampler. llama.cpp's
// default chain differs in one respect: it applies temperature last, so its
// top-p/min-p see the T=1 distribution. We temper first because Qwen's
// recommended settings (generation_config.json) were tuned with HF.
//
// Settings is the one table of the parameters every front end takes, with
// their names and ranges; Flags, FlagName, SetFlag and Describe take and
// show them by their names on the command line, the seed among them, as
// qwenrun's chat does with /set and /show.
package sampling
