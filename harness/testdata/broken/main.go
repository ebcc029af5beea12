// Command broken does not compile, on purpose: the harness's specs check that a failed go build
// surfaces the compiler's output as the image build log.
package main

func main() {
	undefinedOnPurpose()
}
