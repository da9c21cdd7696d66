//! The test server itself: it answers, restarts on the same address empty, and leaves no process.

use holdoff_fleet::testing::RedisServer;

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn unix_and_tcp_servers_restart_empty_on_the_same_address_and_stop_on_drop() {
    for mut server in [RedisServer::unix().unwrap(), RedisServer::tcp().unwrap()] {
        let url = server.url();
        let dir = server.dir().to_path_buf();
        let pid = server.pid().unwrap();
        assert!(alive(pid), "{url}");
        assert_eq!(server.command(&["SET", "k", "v"]).unwrap(), "+OK\r\n");
        server.stop();
        assert!(server.command(&["PING"]).is_err());
        assert!(!alive(pid) && server.pid().is_none());
        server.start().unwrap();
        let pid = server.pid().unwrap();
        assert_eq!(server.url(), url);
        assert_eq!(
            server.command(&["GET", "k"]).unwrap(),
            "$-1\r\n",
            "nothing persisted"
        );
        drop(server);
        assert!(!alive(pid), "{url}");
        assert!(!dir.exists());
    }
}
