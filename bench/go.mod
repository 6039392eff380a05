module github.com/floodgate/floodgate/bench

go 1.26.0

replace github.com/floodgate/floodgate => ../
