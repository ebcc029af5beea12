package vllm

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeProber binds every port but the busy ones; the kernel hands out ephemeral ports from 40000.
type fakeProber struct {
	busy  map[int]bool
	next  int
	binds int
}

func (f *fakeProber) Bind(port int) bool { f.binds++; return !f.busy[port] }

func (f *fakeProber) Ephemeral() (int, error) {
	f.next++
	return 40000 + f.next, nil
}

func busy(ports ...int) *fakeProber {
	f := &fakeProber{busy: map[int]bool{}}
	for _, p := range ports {
		f.busy[p] = true
	}
	return f
}

// TestPortAlloc encodes vllm/utils/network_utils.py's allocators under each rule: _get_open_port,
// get_open_port, get_open_ports_list (and the rules' PRs #36191 and #50965).
func TestPortAlloc(t *testing.T) {
	reserved := func(lo int) *[2]int { return &[2]int{lo, lo + 10} }
	main := Profile{VLLMPortList: VLLMPortListAdvance, OpenPortReserved: OpenPortReservedRescan}
	tests := []struct {
		name, source string
		alloc        PortAlloc
		prober       *fakeProber
		want         []int
		// spins: the allocator never returns; err: the exception it raises.
		spins bool
		err   string
	}{
		{"no VLLM_PORT: the kernel picks",
			"_get_open_port: bind(('', 0))",
			PortAlloc{Func: FuncGetOpenPort}, busy(), []int{40001}, false, ""},
		{"VLLM_PORT free: itself",
			"_get_open_port: start_port = VLLM_PORT, first port that binds",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(5678)}, busy(), []int{5678}, false, ""},
		{"VLLM_PORT held: the next free one",
			"_get_open_port: port += 1 on OSError",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(5678)}, busy(5678, 5679), []int{5680}, false, ""},
		{"VLLM_PORT inside the reserved range, retry: never returns",
			"get_open_port before PR #50965 (issue #50024): while True: candidate = _get_open_port(); if not reserved: return",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(29500), Reserved: reserved(29500), Reserve: OpenPortReservedRetry}, busy(), nil, true, ""},
		{"VLLM_PORT inside the reserved range, rescan: from the range's end",
			"get_open_port after PR #50965: _get_open_port(start_port=reserved.stop, max_attempts=1000)",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(29500), Reserved: reserved(29500), Reserve: OpenPortReservedRescan}, busy(), []int{29510}, false, ""},
		{"rescan that finds nothing in 1000 tries",
			"_get_open_port raises RuntimeError once max_attempts is reached",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(29500), Reserved: reserved(29500), Reserve: OpenPortReservedRescan}, allBusyFrom(29510, 1000), nil, false,
			"RuntimeError: Could not find open port after 1000 attempts starting from port 29510"},
		{"a scan past 65535",
			"socket.bind raises OverflowError, which the scan's except OSError does not catch",
			PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(65535)}, busy(65535), nil, false, "OverflowError: bind(): port must be 0-65535."},
		{"reserved range without VLLM_PORT: the kernel's pick is kept when outside",
			"get_open_port: ephemeral ports are not in [VLLM_DP_MASTER_PORT, +10)",
			PortAlloc{Func: FuncGetOpenPort, Reserved: reserved(29500), Reserve: OpenPortReservedRetry}, busy(), []int{40001}, false, ""},
		{"list with VLLM_PORT, advance: consecutive, in list(set) order",
			"get_open_ports_list after PR #36191 (its test sets VLLM_PORT=5678)",
			PortAlloc{Func: FuncGetOpenPortsList, Count: 5, VLLMPort: some(5678), List: main.VLLMPortList, Reserve: main.OpenPortReserved}, busy(5680), []int{5678, 5679, 5681, 5682, 5683}, false, ""},
		{"list with VLLM_PORT, repeat: the set never grows",
			"get_open_ports_list before PR #36191: while len(ports) < count: ports.add(get_open_port())",
			PortAlloc{Func: FuncGetOpenPortsList, Count: 5, VLLMPort: some(5678), List: VLLMPortListRepeat, Reserve: OpenPortReservedRescan}, busy(), nil, true, ""},
		{"list without VLLM_PORT, repeat: distinct kernel ports",
			"get_open_ports_list before PR #36191: the kernel hands out distinct ports",
			PortAlloc{Func: FuncGetOpenPortsList, Count: 3, List: VLLMPortListRepeat, Reserve: OpenPortReservedRetry}, busy(), []int{40001, 40002, 40003}, false, ""},
		{"list inside the reserved range, retry: no filter at all",
			"get_open_ports_list before PR #50965 skipped no reserved port (issue #50024's VLLM_PORT=VLLM_DP_MASTER_PORT=29500)",
			PortAlloc{Func: FuncGetOpenPortsList, Count: 5, VLLMPort: some(29500), Reserved: reserved(29500), List: VLLMPortListAdvance, Reserve: OpenPortReservedRetry}, busy(),
			[]int{29504, 29500, 29501, 29502, 29503}, false, ""},
		{"list inside the reserved range, rescan: above the range",
			"get_open_ports_list after PR #50965",
			PortAlloc{Func: FuncGetOpenPortsList, Count: 5, VLLMPort: some(29500), Reserved: reserved(29500), List: VLLMPortListAdvance, Reserve: OpenPortReservedRescan}, busy(),
			[]int{29510, 29511, 29512, 29513, 29514}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("source: vllm/utils/network_utils.py %s", tt.source)
			got, err := tt.alloc.Run(tt.prober, func(tries int) bool { return tries >= 50 })
			var spin *SpinError
			switch {
			case tt.spins:
				if !errors.As(err, &spin) || spin.Tries != 50 || spin.Where == "" || spin.Detail == "" {
					t.Fatalf("got %v, %v; want a spin stopped at the 50th try", got, err)
				}
			case tt.err != "":
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %v, %v; want %q", got, err, tt.err)
				}
			default:
				if err != nil || !slices.Equal(got, tt.want) {
					t.Fatalf("got %v, %v; want %v", got, err, tt.want)
				}
			}
		})
	}
}

func allBusyFrom(start, n int) *fakeProber {
	f := busy()
	for p := start; p < start+n; p++ {
		f.busy[p] = true
	}
	return f
}

// TestSpinNamesTheLoop: a spin says which call spins and on what, for the process-hung message.
func TestSpinNamesTheLoop(t *testing.T) {
	a := PortAlloc{Func: FuncGetOpenPort, VLLMPort: some(29500), Reserved: &[2]int{29500, 29510}, Reserve: OpenPortReservedRetry}
	_, err := a.Run(busy(), func(tries int) bool { return tries >= 3 })
	for _, want := range []string{"get_open_port", "keeps returning 29500", "VLLM_PORT=29500", "[29500, 29510)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("spin error %v does not say %q", err, want)
		}
	}
}

// TestPySetOrder: list(set) of ints in CPython's order (Objects/setobject.c); golden values from
// python3: the consecutive ports a VLLM_PORT scan returns wrap around the 32-slot table.
func TestPySetOrder(t *testing.T) {
	tests := []struct{ in, want []int }{
		{[]int{29500, 29501, 29502, 29503, 29504}, []int{29504, 29500, 29501, 29502, 29503}},
		{[]int{29510, 29511, 29512, 29513, 29514}, []int{29510, 29511, 29512, 29513, 29514}},
		{[]int{8000, 8001, 8002}, []int{8000, 8001, 8002}},
		{[]int{40001, 33333, 50123, 1234, 7}, []int{40001, 7, 50123, 1234, 33333}},
		{[]int{5600, 5601, 5602, 5603, 5604, 5605, 5606, 5607, 5608, 5609, 5610}, []int{5600, 5601, 5602, 5603, 5604, 5605, 5606, 5607, 5608, 5609, 5610}},
	}
	for _, tt := range tests {
		var s pySet
		for _, v := range tt.in {
			s.add(v)
		}
		if s.add(tt.in[0]) {
			t.Errorf("%v: adding %d again reported new", tt.in, tt.in[0])
		}
		if got := s.list(); !slices.Equal(got, tt.want) {
			t.Errorf("list(set(%v)) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
