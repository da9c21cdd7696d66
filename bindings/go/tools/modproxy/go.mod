module holdoff.dev/go/tools/modproxy

go 1.24.0

require golang.org/x/mod v0.29.0
