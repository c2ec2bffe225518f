module github.com/fulcrumlb/fulcrum

go 1.26.0

require (
	github.com/google/gopacket v1.1.19
	github.com/yerden/go-dpdk v0.0.7
	golang.org/x/crypto v0.59.0
)

require golang.org/x/net v0.62.0 // indirect

require (
	github.com/BurntSushi/toml v1.6.0
	golang.org/x/sys v0.50.0 // indirect
)
