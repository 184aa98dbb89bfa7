// Package imagestore is the node's OCI image store: one per host, under DATA/images, shared by
// every agent process of a local cluster. It stores images (Put, Tag), answers kubelet's image
// questions (Get, List), unpacks layers for overlayfs (Lowers) and mounts container root file
// systems (MountRootfs, UnmountRootfs).
//
// Layout of the store directory:
//
//	oci-layout, index.json, blobs/sha256/<hex>
//	    An OCI image layout that skopeo, umoci or go-containerregistry's layout package can read.
//	    index.json is also the name index: one manifest descriptor per normalized name, the full
//	    name in the annotation io.containerd.image.name and, for tags, the tag in
//	    org.opencontainers.image.ref.name. Blobs are verified against their digest and size in
//	    tmp/ and renamed into place; index.json is replaced by rename under an flock on lock,
//	    only after every blob of the image is in place, so readers never see a half entry.
//	layers/<diffID hex>/
//	    One unpacked layer, overlayfs-ready: OCI whiteouts ".wh.<name>" became 0/0 character
//	    devices and ".wh..wh..opq" the xattr trusted.overlay.opaque=y on its directory. Unpacked
//	    under tmp/, diffID-checked, synced and renamed here under locks/layer-<hex>.
//	l/<12 hex>
//	    Short symlinks to layers/, which Lowers returns, so that many lower directories fit in
//	    mount(2)'s one page of overlay options (MountRootfs falls back to fsconfig "lowerdir+"
//	    beyond it). l/empty is the lower of an image without layers.
//	tmp/
//	    Work in progress; a crash may leave files here, which never hold a published blob or
//	    layer. A crashed layer unpack is removed by the next unpack of that layer.
//
//	leases/<hash of a bundle path>.json
//	    One record per container instance using an image (Acquire, Release, Lease): which
//	    image, pod and bundle. A lease is live while its bundle's rootfs is mounted, so a
//	    lease left by an agent that died with its cluster is recognised as stale.
//	used/<manifest hex>
//	    Empty files whose mtime is when a container last started or stopped using the image:
//	    the order of garbage collection (least recently used first).
//	locks/content
//	    Put (and anything else writing blobs or layers not yet in the index) holds it shared
//	    (HoldContent); Sweep holds it exclusively while it deletes.
//
// Removal (Remove, GarbageCollect) first takes an image's names out of index.json in one
// atomic update, then Sweep deletes the blobs and unpacked layers that neither the index, a
// live lease nor a mounted overlay references; a layer is renamed out of layers/ before it is
// deleted. A crash at any point leaves every indexed image whole; the next Sweep finishes.
// Load stores docker-save tarballs and OCI layouts, unpacking (and so checking) every layer
// before the image gets a name.
package imagestore
