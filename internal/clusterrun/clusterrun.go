// Package clusterrun runs a hepcache cluster of real processes on loopback
// for the multi-node tests and the cluster benchmark: each node is the
// hepcache binary with its own cache directory, its own 127.0.0.x address
// (so that XrdCl's tried= host list tells nodes apart) and gossip port. Nodes
// can be killed (SIGKILL), stopped (SIGTERM), restarted and added.
package clusterrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config describes a cluster to run.
type Config struct {
	// Bin is the hepcache binary. Required.
	Bin string
	// Origin is the default origin of every node ("root://127.0.0.1:port").
	// Required.
	Origin string
	// Dir holds the nodes' directories. Required.
	Dir string
	// Mode is cluster.mode: redirect (default), proxy or local.
	Mode string
	// Profile is cluster.profile. Default "lan".
	Profile string
	// HTTP gives every node an HTTP listener.
	HTTP bool
	// Extra is appended to every node's config (TOML lines).
	Extra []string
}

// Node is one hepcache process.
type Node struct {
	// Name is the node's cluster name ("n0", "n1", ...; "rd" for a
	// redirector).
	Name string
	// IP is the node's loopback address (127.0.0.x).
	IP string
	// Root is the root:// "ip:port"; HTTP the http:// base URL or "";
	// Metrics the base URL of /metrics; Gossip the gossip "ip:port".
	Root, HTTP, Metrics, Gossip string
	// CacheDir is the node's cache directory; LogPath its stderr.
	CacheDir, LogPath string
	// Redirector is set for a node without cache space.
	Redirector bool

	configPath string
	cmd        *exec.Cmd
	done       chan struct{}
}

// Cluster is a set of running nodes.
type Cluster struct {
	cfg Config

	// mu protects Nodes and next.
	mu    sync.Mutex
	Nodes []*Node
	next  int
}

// Start starts n cache nodes (and a redirector first if redirector is
// set) and waits until every node sees all of them.
func Start(cfg Config, n int, redirector bool) (*Cluster, error) {
	if cfg.Mode == "" {
		cfg.Mode = "redirect"
	}
	if cfg.Profile == "" {
		cfg.Profile = "lan"
	}
	if cfg.Bin == "" || cfg.Origin == "" || cfg.Dir == "" {
		return nil, errors.New("clusterrun: Bin, Origin and Dir are required")
	}
	c := &Cluster{cfg: cfg}
	if redirector {
		if _, err := c.add("rd", true); err != nil {
			c.Close()
			return nil, err
		}
	}
	for range n {
		if _, err := c.Add(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if _, err := c.WaitConverged(60 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Add starts a new cache node that joins the cluster.
func (c *Cluster) Add() (*Node, error) {
	c.mu.Lock()
	name := fmt.Sprintf("n%d", c.next)
	c.next++
	c.mu.Unlock()
	return c.add(name, false)
}

func (c *Cluster) add(name string, redirector bool) (*Node, error) {
	c.mu.Lock()
	ip := fmt.Sprintf("127.0.0.%d", 20+len(c.Nodes))
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, strconv.Quote(n.Gossip))
	}
	c.mu.Unlock()
	ports, err := freePorts(ip, 4)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.cfg.Dir, name)
	n := &Node{
		Name: name, IP: ip, Redirector: redirector,
		Root:     net.JoinHostPort(ip, strconv.Itoa(ports[0])),
		Gossip:   net.JoinHostPort(ip, strconv.Itoa(ports[1])),
		Metrics:  "http://" + net.JoinHostPort(ip, strconv.Itoa(ports[2])),
		CacheDir: filepath.Join(dir, "cache"),
		LogPath:  filepath.Join(dir, "hepcache.log"),
	}
	if c.cfg.HTTP {
		n.HTTP = "http://" + net.JoinHostPort(ip, strconv.Itoa(ports[3]))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	role := "cache"
	if redirector {
		role = "redirector"
	}
	lines := []string{
		"[server]",
		fmt.Sprintf("listen = %q", n.Root),
		fmt.Sprintf("metrics_listen = %q", strings.TrimPrefix(n.Metrics, "http://")),
		"shutdown_timeout = \"5s\"",
	}
	if n.HTTP != "" {
		lines = append(lines, fmt.Sprintf("http_listen = %q", strings.TrimPrefix(n.HTTP, "http://")))
	}
	lines = append(lines,
		"[cache]", fmt.Sprintf("dir = %q", n.CacheDir),
		"[origin]", fmt.Sprintf("default = %q", c.cfg.Origin),
		"[log]", `level = "debug"`,
		"[cluster]", "enabled = true",
		fmt.Sprintf("name = %q", name),
		fmt.Sprintf("role = %q", role),
		fmt.Sprintf("mode = %q", c.cfg.Mode),
		fmt.Sprintf("profile = %q", c.cfg.Profile),
		fmt.Sprintf("gossip_listen = %q", n.Gossip),
		fmt.Sprintf("join = [%s]", strings.Join(seeds, ", ")),
	)
	lines = append(lines, c.cfg.Extra...)
	n.configPath = filepath.Join(dir, "hepcache.toml")
	if err := os.WriteFile(n.configPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := c.launch(n); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	return n, nil
}

// freePorts returns n free TCP ports on ip that are also free for UDP
// (gossip uses both).
func freePorts(ip string, n int) ([]int, error) {
	var out []int
	var lns []io.Closer
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for len(out) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("clusterrun: listen on %s: %w", ip, err)
		}
		lns = append(lns, l)
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		lns = append(lns, u)
		out = append(out, p)
	}
	return out, nil
}

// launch starts n's process and waits until it serves /metrics.
func (c *Cluster) launch(n *Node) error {
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.cfg.Bin, "serve", "--config", n.configPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("clusterrun: start %s: %w", n.Name, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(n.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := n.Metric("hepcache_cluster_members"); err == nil {
			return nil
		}
		select {
		case <-n.done:
			return fmt.Errorf("clusterrun: node %s exited at start:\n%s", n.Name, n.Tail(30))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterrun: node %s did not start:\n%s", n.Name, n.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports whether the node's process runs.
func (n *Node) Alive() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill kills the node with SIGKILL (no graceful leave) and waits for it.
func (n *Node) Kill() {
	if n.Alive() {
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
}

// Stop stops the node with SIGTERM (graceful leave) and waits for it.
func (n *Node) Stop() {
	if n.Alive() {
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			n.Kill()
		}
	}
}

// Restart starts a stopped or killed node again with its cache directory.
func (c *Cluster) Restart(n *Node) error {
	n.Kill()
	return c.launch(n)
}

// Tail returns the last lines of the node's log.
func (n *Node) Tail(lines int) string {
	b, _ := os.ReadFile(n.LogPath)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Metric reads one unlabelled metric of the node's /metrics.
func (n *Node) Metric(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.Metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no metric %s", n.Name, name)
}

// Alive returns the nodes whose process runs.
func (c *Cluster) Alive() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.Nodes {
		if n.Alive() {
			out = append(out, n)
		}
	}
	return out
}

// WaitConverged waits until every running node sees exactly the running
// nodes, and returns how long that took; it fails after timeout.
func (c *Cluster) WaitConverged(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		alive := c.Alive()
		ok := true
		var seen []string
		for _, n := range alive {
			v, err := n.Metric("hepcache_cluster_members")
			seen = append(seen, fmt.Sprintf("%s:%v", n.Name, v))
			if err != nil || int(v) != len(alive) {
				ok = false
			}
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("clusterrun: views did not converge to %d nodes in %v (%s)", len(alive), timeout, strings.Join(seen, " "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close kills every node.
func (c *Cluster) Close() {
	c.mu.Lock()
	nodes := append([]*Node(nil), c.Nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		n.Kill()
	}
}
