module holdoff.dev/go

go 1.24
