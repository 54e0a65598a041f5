package state

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestConnectNamesWhatIsWrongWithoutThePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name     string
		url      string
		topology Topology
		want     string
	}{
		{"malformed", "redis://:hunter2@127.0.0.1:notaport", Standalone, "parse Redis URL"},
		{"cluster with an unknown parameter", "redis://:hunter2@127.0.0.1:7000?colour=blue", Cluster, "parse Redis Cluster URL"},
		{"cluster with a database", "redis://:hunter2@127.0.0.1:7000/5?addr=127.0.0.1:7001", Cluster, "a cluster has no database 5"},
		{"sentinel without master_name", "redis://:hunter2@127.0.0.1:26379", Sentinel, "master_name parameter is required"},
		{"unknown topology", "redis://:hunter2@127.0.0.1:6379", Topology("ring"), `unknown Redis topology "ring"`},
		{"nobody listening", "redis://:hunter2@127.0.0.1:1", Standalone, "connect to Redis (standalone) at 127.0.0.1:1"},
		{"no cluster listening", "redis://:hunter2@127.0.0.1:1?addr=127.0.0.1:2", Cluster, "connect to Redis (cluster) at 127.0.0.1:1,127.0.0.1:2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rdb, err := Connect(ctx, tt.url, tt.topology)
			if err == nil {
				rdb.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q: want it to contain %q and never the password", err, tt.want)
			}
		})
	}
}

func TestParseTopology(t *testing.T) {
	for in, want := range map[string]Topology{"": Standalone, "standalone": Standalone, "cluster": Cluster, "sentinel": Sentinel} {
		if got, err := ParseTopology(in); err != nil || got != want {
			t.Errorf("ParseTopology(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseTopology("Cluster"); err == nil || !strings.Contains(err.Error(), "standalone, cluster or sentinel") {
		t.Errorf("ParseTopology(Cluster) = %v, want an error naming the choices", err)
	}
}
