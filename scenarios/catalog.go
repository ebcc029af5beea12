package scenarios

// catalog says whether well-known models are mixture-of-experts, so a scenario need not. The
// architecture each entry's Hugging Face config.json names is given: that is what vLLM dispatches on
// (vllm/model_executor/models/registry.py), and the MoE ones are the *Moe*/DeepseekV3/Mixtral
// classes with expert layers. A model not listed must say `moe:` in the scenario.
var catalog = map[string]bool{
	"deepseek-ai/DeepSeek-V3":              true,  // DeepseekV3ForCausalLM: 256 routed experts
	"deepseek-ai/DeepSeek-V3-0324":         true,  // DeepseekV3ForCausalLM
	"deepseek-ai/DeepSeek-R1":              true,  // DeepseekV3ForCausalLM
	"deepseek-ai/DeepSeek-R1-0528":         true,  // DeepseekV3ForCausalLM
	"Qwen/Qwen3-235B-A22B":                 true,  // Qwen3MoeForCausalLM: 128 experts, 8 active
	"Qwen/Qwen3-30B-A3B":                   true,  // Qwen3MoeForCausalLM
	"mistralai/Mixtral-8x7B-Instruct-v0.1": true,  // MixtralForCausalLM: 8 experts
	"moonshotai/Kimi-K2-Instruct":          true,  // DeepseekV3ForCausalLM: 384 experts
	"meta-llama/Llama-3.1-8B-Instruct":     false, // LlamaForCausalLM
	"meta-llama/Llama-3.1-70B-Instruct":    false, // LlamaForCausalLM
	"Qwen/Qwen2.5-7B-Instruct":             false, // Qwen2ForCausalLM
	"Qwen/Qwen3-8B":                        false, // Qwen3ForCausalLM
}

// KnownModel reports whether the catalog knows name, and if so whether it is MoE.
func KnownModel(name string) (moe, known bool) {
	moe, known = catalog[name]
	return moe, known
}
