package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology says how urlflow reaches Redis: one server, a Cluster, or a primary found
// through Sentinel. Every key that an atomic operation touches carries the user's hash
// tag, so that the operation stays in one Cluster slot.
type Topology string

// The topologies of Connect.
const (
	// Standalone is one server: redis://[user:password@]host:port[/db].
	Standalone Topology = "standalone"
	// Cluster is a Redis Cluster, found from one or more seed nodes:
	// redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3.
	Cluster Topology = "cluster"
	// Sentinel is a primary with replicas watched by Sentinel; the URL names the
	// sentinels and the primary:
	// redis://[sentinel-user:sentinel-password@]host:port?master_name=NAME&addr=host2:port2,
	// with the primary's own credentials, if any, in the username and password parameters.
	Sentinel Topology = "sentinel"
)

// Topologies lists the topologies Connect accepts.
var Topologies = []Topology{Standalone, Cluster, Sentinel}

// ParseTopology returns the topology named s ("" is Standalone).
func ParseTopology(s string) (Topology, error) {
	if s == "" {
		return Standalone, nil
	}
	for _, t := range Topologies {
		if Topology(s) == t {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown Redis topology %q (want standalone, cluster or sentinel)", s)
}

// Connect returns a Redis client for url (redis:// or rediss://, as go-redis parses it for
// topology) and checks that Redis answers. The client is a UniversalClient, the interface
// the whole package works on.
func Connect(ctx context.Context, url string, topology Topology) (redis.UniversalClient, error) {
	rdb, err := newClient(url, topology)
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("connect to Redis (%s) at %s: %w", topology, RedisAddrs(url, topology), err)
	}
	return rdb, nil
}

// ClusterStateReload is how old a Cluster client's map of slots to nodes may grow before a
// command makes it read the map again (CLUSTER SLOTS, in the background). A primary that
// dies answers no MOVED that would tell the client where its slots went: until the map is
// read again, every command for those slots dials the dead node. go-redis' default is a
// minute (TestAClusterFailoverMidFlowsLosesNothing measured 60 s of 503s for the users on
// that node); at a second, a replica that took over serves them about a second after the
// Cluster promoted it.
const ClusterStateReload = time.Second

func newClient(rawURL string, topology Topology) (redis.UniversalClient, error) {
	switch topology {
	case Standalone:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parse Redis URL: %w", redactURLError(err))
		}
		return redis.NewClient(opts), nil
	case Cluster:
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parse Redis Cluster URL: %w", redactURLError(err))
		}
		// A Cluster has database 0 only; go-redis would ignore a /db quietly.
		if u, err := url.Parse(rawURL); err == nil && u.Path != "" && u.Path != "/" && u.Path != "/0" {
			return nil, fmt.Errorf("parse Redis Cluster URL: a cluster has no database %s: remove it", strings.TrimPrefix(u.Path, "/"))
		}
		if opts.ClusterStateReloadInterval == 0 {
			opts.ClusterStateReloadInterval = ClusterStateReload
		}
		return redis.NewClusterClient(opts), nil
	case Sentinel:
		opts, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parse Redis Sentinel URL: %w", redactURLError(err))
		}
		if opts.MasterName == "" {
			return nil, errors.New("parse Redis Sentinel URL: the master_name parameter is required")
		}
		return redis.NewFailoverClient(opts), nil
	}
	return nil, fmt.Errorf("unknown Redis topology %q", topology)
}

// RedisAddrs returns the addresses that url names for topology, without credentials, for
// logs and the banner; "(unparsable URL)" when it does not parse.
func RedisAddrs(url string, topology Topology) string {
	var addrs []string
	switch topology {
	case Cluster:
		if opts, err := redis.ParseClusterURL(url); err == nil {
			addrs = opts.Addrs
		}
	case Sentinel:
		if opts, err := redis.ParseFailoverURL(url); err == nil {
			addrs = opts.SentinelAddrs
		}
	default:
		if opts, err := redis.ParseURL(url); err == nil {
			addrs = []string{opts.Addr}
		}
	}
	if len(addrs) == 0 {
		return "(unparsable URL)"
	}
	return strings.Join(addrs, ",")
}

// redactURLError keeps go-redis' word on what is wrong but never the URL itself, which
// may hold a password: net/url's errors quote the whole URL.
func redactURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("malformed URL: %w", uerr.Err)
	}
	return err
}
