// Package pace is how a simulated process paces its attempts to reach a peer that is not up yet
// (a rank 0 that is not listening, a store that is still starting): the pause after a failed
// attempt is a twentieth of the time waited so far, between a first and a largest pause. A member
// of a small deployment, whose peers come up within milliseconds, retries at once; one that waits
// for a host started late in a round of 65 gives up at most a twentieth of its wait to the pacing
// and makes a few attempts a second instead of dozens. The number of attempts over a wait of T
// grows with log T, not with T: at a fixed 50 ms, the followers of a local 64-node run dialled
// their rank 0 about 50,000 times, and that run took a quarter longer than with this pacing.
package pace

import "time"

// ConnectAttempt bounds one TCP connect to a peer; a connect that takes longer is abandoned and
// tried again on a new socket. A peer container's name resolves a moment before its interface
// answers (the engine registers it when it joins the network, early in its start), and a SYN
// sent into that moment is lost: the kernel sends it again only after its initial retransmission
// timeout of a second, which a run of five hosts measured as a second more, at random, on one
// start in two. On a bridge or loopback a connect takes well under a millisecond; the bound
// leaves two orders of magnitude for a loaded machine.
const ConnectAttempt = 200 * time.Millisecond

// LookupAttempt bounds one DNS lookup of a peer's name; a lookup that takes longer is abandoned
// and, like a failed connect, tried again. Docker's DNS forwards a name it does not know (a host
// whose container has not joined the network yet) to the machine's resolver, and drops what it
// cannot forward: 200 concurrent lookups of unknown names through it got 101 no answer at all. Go's
// resolver then waits 5 s before it asks again: on a 32-node run whose store started last, the
// hosts came up 2-3 s after it, with the machine idle meanwhile. An answer from Docker's own table
// takes about a millisecond.
const LookupAttempt = 250 * time.Millisecond

// Share is the part of the time waited so far that the next pause takes (1/Share).
const Share = 20

// Pause is the pause after a failed attempt, when the first attempt was waited ago: waited/Share,
// at least first and at most largest.
func Pause(waited, first, largest time.Duration) time.Duration {
	return min(max(waited/Share, first), largest)
}
