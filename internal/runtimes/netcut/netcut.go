// Package netcut cuts hosts of a run off from each other with nftables, for the fault timeline's
// partition steps: one table per run, named after the run and its owner process, one chain per
// partition, dropping every packet between the two sides in both directions. On Docker the chain
// hooks the bridge's forward path (family bridge: the frames between two containers of the run's
// network); on the local runtime it hooks loopback input (family ip), which separates hosts
// because each local host dials from its own 127.A.B.x address. A run removes its table on
// Close; a table whose owner died (a SIGKILLed harness) is removed by the next run's sweep, and
// `widetp clean` removes every one.
package netcut

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/widetp/widetp/internal/runtimes"
)

// Hook is where a run's partitions drop packets.
type Hook struct {
	Family string // nft family: "bridge" or "ip"
	Chain  string // "forward" or "input"
	// Iif restricts the rules to an input interface ("lo"); empty: any.
	Iif string
}

var (
	// Bridge drops frames forwarded between the containers of a bridge network.
	Bridge = Hook{Family: "bridge", Chain: "forward"}
	// Loopback drops packets between loopback addresses.
	Loopback = Hook{Family: "ip", Chain: "input", Iif: "lo"}
)

const prefix = "widetp_"

// Available tells whether this process can make nftables rules: the nft command is installed
// and it may list the tables (root, or CAP_NET_ADMIN).
func Available(ctx context.Context) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return errors.New("partitions between hosts need nftables' nft command (Debian/Ubuntu: apt-get install nftables): it is not on PATH")
	}
	if _, err := nft(ctx, "", "list", "tables"); err != nil {
		return fmt.Errorf("partitions between hosts need to make nftables rules (root or CAP_NET_ADMIN): %w", err)
	}
	return nil
}

// Table is one run's partitions.
type Table struct {
	hook Hook
	name string

	mu    sync.Mutex
	made  bool
	cuts  map[string][2][]netip.Addr
	order []string
}

// New is the table of run runID owned by owner (made on the first Partition).
func New(hook Hook, runID string, owner runtimes.Owner) *Table {
	return &Table{hook: hook, name: fmt.Sprintf("%s%s_%d_%d", prefix, sanitize(runID), owner.PID, owner.Start), cuts: map[string][2][]netip.Addr{}}
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

var unsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9]`) })

func sanitize(s string) string { return unsafe().ReplaceAllString(s, "") }

func chainName(name string) string { return "cut_" + unsafe().ReplaceAllString(name, "_") }

// Partition drops every packet between a and b (both ways) until Heal(name). Calling it again
// with the same name replaces the addresses (a host that restarted with another address).
func (t *Table) Partition(ctx context.Context, name string, a, b []netip.Addr) error {
	if len(a) == 0 || len(b) == 0 {
		return fmt.Errorf("partition %s: both sides need an address", name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var script strings.Builder
	if !t.made {
		fmt.Fprintf(&script, "add table %s %s\n", t.hook.Family, t.name)
	}
	ch := chainName(name)
	if _, ok := t.cuts[name]; ok {
		fmt.Fprintf(&script, "flush chain %s %s %s\n", t.hook.Family, t.name, ch)
	} else {
		fmt.Fprintf(&script, "add chain %s %s %s { type filter hook %s priority -10; policy accept; }\n", t.hook.Family, t.name, ch, t.hook.Chain)
	}
	iif := ""
	if t.hook.Iif != "" {
		iif = fmt.Sprintf("iifname %q ", t.hook.Iif)
	}
	for _, dir := range [][2][]netip.Addr{{a, b}, {b, a}} {
		fmt.Fprintf(&script, "add rule %s %s %s %sip saddr %s ip daddr %s drop\n", t.hook.Family, t.name, ch, iif, set(dir[0]), set(dir[1]))
	}
	if _, err := nft(ctx, script.String(), "-f", "-"); err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	t.made = true
	if _, ok := t.cuts[name]; !ok {
		t.order = append(t.order, name)
	}
	t.cuts[name] = [2][]netip.Addr{a, b}
	return nil
}

// Cuts returns the partitions in force, by name.
func (t *Table) Cuts() map[string][2][]netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][2][]netip.Addr, len(t.cuts))
	for k, v := range t.cuts {
		out[k] = v
	}
	return out
}

// Heal ends partition name.
func (t *Table) Heal(ctx context.Context, name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.cuts[name]; !ok {
		return fmt.Errorf("heal %s: no such partition in force", name)
	}
	if _, err := nft(ctx, "", "delete", "chain", t.hook.Family, t.name, chainName(name)); err != nil {
		return fmt.Errorf("heal %s: %w", name, err)
	}
	delete(t.cuts, name)
	return nil
}

// Close removes the table and every partition in it.
func (t *Table) Close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.made {
		return nil
	}
	if _, err := nft(ctx, "", "delete", "table", t.hook.Family, t.name); err != nil && !notFound(err) {
		return fmt.Errorf("remove nftables table %s: %w", t.name, err)
	}
	t.made = false
	t.cuts = map[string][2][]netip.Addr{}
	return nil
}

// Untrack keeps the kernel's connection tracker out of the traffic between the addresses of
// subnet other than gateway, in a table of its own (named after the run and its owner as the
// partitions' table is, with "ct" before the run, so that the sweep and clean treat it alike). On Docker, subnet is a run's bridge network and
// gateway its address on this host: the containers' own traffic passes the host's netfilter
// (bridge-nf-call-iptables), and the engine, each time it detaches a container, reads the whole
// connection table to drop that container's entries (libnetwork's clearEndpointConnections).
// A 64-host run leaves some 2,500 entries (10,000 and more when runs follow each other: closed
// connections stay 120 s), which the engine's teardown read 65 times. Untracked, the containers'
// connections still pass Docker's rules, which accept traffic within a network whatever its
// state; the gateway's (the harness's own connections, and any the engine translates) stay
// tracked.
func Untrack(ctx context.Context, runID string, owner runtimes.Owner, subnet netip.Prefix, gateway netip.Addr) (*Table, error) {
	t := New(Hook{Family: "ip"}, "ct"+runID, owner)
	var script strings.Builder
	fmt.Fprintf(&script, "add table ip %s\n", t.name)
	// Forwarded frames (prerouting) and, for a subnet of this host's own addresses, local ones
	// (output): both hooks come before the tracker's own (priority raw).
	for _, hook := range []string{"prerouting", "output"} {
		fmt.Fprintf(&script, "add chain ip %s untracked_%s { type filter hook %s priority raw; policy accept; }\n", t.name, hook, hook)
		fmt.Fprintf(&script, "add rule ip %s untracked_%s ip saddr %s ip daddr %s ip saddr != %s ip daddr != %s notrack\n",
			t.name, hook, subnet.Masked(), subnet.Masked(), gateway, gateway)
	}
	if _, err := nft(ctx, script.String(), "-f", "-"); err != nil {
		return nil, fmt.Errorf("untrack %s: %w", subnet, err)
	}
	t.made = true
	return t, nil
}

func set(addrs []netip.Addr) string {
	ss := make([]string, len(addrs))
	for i, a := range addrs {
		ss[i] = a.String()
	}
	sort.Strings(ss)
	return "{ " + strings.Join(ss, ", ") + " }"
}

// Leftover is a run's table found on the machine.
type Leftover struct {
	Family, Name string
	Owner        runtimes.Owner
}

// List returns every widetp table on the machine (none, without nft or the right to list).
func List(ctx context.Context, machine string) ([]Leftover, error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, nil
	}
	out, err := nft(ctx, "", "-j", "list", "tables")
	if err != nil {
		if os.Geteuid() != 0 {
			return nil, nil // not ours to see; a run that could make tables could list them
		}
		return nil, err
	}
	var doc struct {
		Nftables []struct {
			Table *struct {
				Family string `json:"family"`
				Name   string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("read nft's table list: %w", err)
	}
	var ls []Leftover
	for _, e := range doc.Nftables {
		if e.Table == nil || !strings.HasPrefix(e.Table.Name, prefix) {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(e.Table.Name, prefix), "_")
		if len(parts) != 3 {
			continue
		}
		pid, perr := strconv.Atoi(parts[1])
		start, serr := strconv.ParseUint(parts[2], 10, 64)
		if perr != nil || serr != nil {
			continue
		}
		ls = append(ls, Leftover{Family: e.Table.Family, Name: e.Table.Name, Owner: runtimes.Owner{Machine: machine, PID: pid, Start: start}})
	}
	return ls, nil
}

// Sweep removes the tables whose owner is not alive and returns how many it removed. nftables
// are the kernel's of this machine, so their owners are processes of this machine.
func Sweep(ctx context.Context, machine string, alive func(runtimes.Owner) bool) (int, error) {
	ls, err := List(ctx, machine)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, l := range ls {
		if alive(l.Owner) {
			continue
		}
		if _, err := nft(ctx, "", "delete", "table", l.Family, l.Name); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove leftover nftables table %s: %w", l.Name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func notFound(err error) bool {
	return strings.Contains(err.Error(), "No such file or directory")
}

func nft(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "nft", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Partitions are a runtime's partitions between its hosts, by host name: the runtime resolves a
// host to its current address, and re-applies every partition after a host restarted (a
// container may come back with another address).
type Partitions struct {
	hook    Hook
	runID   string
	owner   runtimes.Owner
	resolve func(ctx context.Context, host string) (netip.Addr, error)

	mu    sync.Mutex
	table *Table
	hosts map[string][2][]string
}

// NewPartitions is a run's partitions; nothing is made before the first Partition.
func NewPartitions(hook Hook, runID string, owner runtimes.Owner, resolve func(ctx context.Context, host string) (netip.Addr, error)) *Partitions {
	return &Partitions{hook: hook, runID: runID, owner: owner, resolve: resolve, hosts: map[string][2][]string{}}
}

func (p *Partitions) addrs(ctx context.Context, hosts []string) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, len(hosts))
	for _, h := range hosts {
		a, err := p.resolve(ctx, h)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Partition cuts hosts a off from hosts b until Heal(name).
func (p *Partitions) Partition(ctx context.Context, name string, a, b []string) error {
	if err := Available(ctx); err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	for _, h := range a {
		for _, g := range b {
			if h == g {
				return fmt.Errorf("partition %s: host %s is on both sides", name, h)
			}
		}
	}
	aa, err := p.addrs(ctx, a)
	if err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	ba, err := p.addrs(ctx, b)
	if err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.table == nil {
		p.table = New(p.hook, p.runID, p.owner)
	}
	if err := p.table.Partition(ctx, name, aa, ba); err != nil {
		return err
	}
	p.hosts[name] = [2][]string{a, b}
	return nil
}

// Heal ends partition name.
func (p *Partitions) Heal(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.hosts[name]; !ok || p.table == nil {
		return fmt.Errorf("heal %s: no such partition in force", name)
	}
	if err := p.table.Heal(ctx, name); err != nil {
		return err
	}
	delete(p.hosts, name)
	return nil
}

// Refresh re-applies every partition that involves host with the hosts' current addresses.
func (p *Partitions) Refresh(ctx context.Context, host string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for name, sides := range p.hosts {
		if !contains(sides[0], host) && !contains(sides[1], host) {
			continue
		}
		aa, err := p.addrs(ctx, sides[0])
		if err == nil {
			var ba []netip.Addr
			if ba, err = p.addrs(ctx, sides[1]); err == nil {
				err = p.table.Partition(ctx, name, aa, ba)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("re-apply partition %s after %s restarted: %w", name, host, err))
		}
	}
	return errors.Join(errs...)
}

// Close removes the run's table.
func (p *Partitions) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.table == nil {
		return nil
	}
	err := p.table.Close(ctx)
	if err == nil {
		p.table = nil
		p.hosts = map[string][2][]string{}
	}
	return err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
