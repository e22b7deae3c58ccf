module github.com/hepcache/hepcache

go 1.26.8

require (
	github.com/BurntSushi/toml v1.4.0
	github.com/hashicorp/memberlist v0.7.0
	go-hep.org/x/hep v0.36.0
	golang.org/x/image v0.24.0
	golang.org/x/sys v0.47.0
)

require (
	github.com/go-mmap/mmap v0.7.0 // indirect
	github.com/gonuts/binary v0.2.0 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/go-uuid v1.0.3 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/pierrec/lz4/v4 v4.1.21 // indirect
	github.com/pierrec/xxHash v0.1.5 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	github.com/ulikunitz/xz v0.5.12 // indirect
	golang.org/x/exp v0.0.0-20241009180824-f66d83c29e7c // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/tools v0.48.0 // indirect
	gonum.org/v1/gonum v0.15.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
