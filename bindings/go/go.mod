module example.invalid/holdoff/go

go 1.24

require github.com/sony/gobreaker/v2 v2.4.0
