package etcd

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tranche/tranche/internal/storage"
)

// TestForwardResumes: a watch etcd ends without a compaction (a member that stopped, a
// lost leader) is resumed from the revision after the last one delivered, while a
// compaction or a closed client end the stream with an Error event.
func TestForwardResumes(t *testing.T) {
	put := clientv3.WatchResponse{Events: []*clientv3.Event{{Type: mvccpb.PUT,
		Kv: &mvccpb.KeyValue{Key: []byte("/p/a"), Value: []byte("v"), CreateRevision: 7, ModRevision: 7}}}}
	alive := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name          string
		resps         []clientv3.WatchResponse
		clientCtx     context.Context
		resume        bool
		wantErr       error
		wantNext      int64
		wantDelivered int
	}{
		{"closed by etcd after an event", []clientv3.WatchResponse{put}, alive, true, nil, 8, 1},
		{"cancelled by etcd", []clientv3.WatchResponse{put, {Canceled: true}}, alive, true, nil, 8, 1},
		{"compacted", []clientv3.WatchResponse{{CompactRevision: 9}}, alive, false, storage.ErrCompacted, 5, 1},
		{"client closed", []clientv3.WatchResponse{put}, cancelled, false, errors.New("etcd client closed"), 8, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			wch := make(chan clientv3.WatchResponse, len(c.resps))
			for _, r := range c.resps {
				wch <- r
			}
			close(wch)
			out := make(chan storage.Event, 10)
			next := int64(5)
			resume, _ := forward(context.Background(), c.clientCtx, out, "/p/", 4, wch, &next)
			close(out)
			var got []storage.Event
			for ev := range out {
				got = append(got, ev)
			}
			if resume != c.resume || next != c.wantNext || len(got) != c.wantDelivered {
				t.Fatalf("resume %v, next %d, %d events %+v; want resume %v, next %d, %d events", resume, next, len(got), got, c.resume, c.wantNext, c.wantDelivered)
			}
			if c.wantErr != nil {
				last := got[len(got)-1]
				if last.Type != storage.Error || (errors.Is(c.wantErr, storage.ErrCompacted) && !errors.Is(last.Err, storage.ErrCompacted)) ||
					!errors.Is(c.wantErr, storage.ErrCompacted) && last.Err.Error() != "watch \"/p/\": "+c.wantErr.Error() {
					t.Fatalf("last event %+v, want an Error event with %v", last, c.wantErr)
				}
			}
		})
	}
}
