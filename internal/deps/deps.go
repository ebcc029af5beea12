package deps

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/pebbe/zmq4"
	_ "github.com/testcontainers/testcontainers-go"
	_ "go.yaml.in/yaml/v3"
	_ "pgregory.net/rapid"
)
