"""Run DynamoDB Local bound to one address (127.0.0.1 by default), not every interface.

DynamoDB Local's command line has no bind-address option: ``java -jar DynamoDBLocal.jar``
listens on all interfaces, so anyone who reaches the machine could read and write its
tables. Its own ``ServerRunner`` builds the server from the usual arguments; the small
Java class below takes that server, sets the host of its Jetty connectors before they
open, and starts it. The class touches DynamoDB Local only by reflection, so it does not
depend on the jar's version; it compiles against the ``sqlite4java.jar`` shipped beside it.

It also adds four indexes to DynamoDB Local's own SQLite database, which has none on its
stream tables: every request that names a table describes that table's stream, and the
description's ``SELECT MIN(SequenceNumber) FROM us WHERE StreamID = ?`` reads every
stream record the server holds (records outlive their tables for 24 hours). A test
session writes hundreds of thousands, so each request grew slower as the session went on
(``python -m benchmarks.probe_stream_index``: as shipped, 2.6 ms per GetItem/PutItem on
an empty server, 8.3 ms after 20,000 stream records elsewhere, 23.4 ms after 60,000;
with the indexes 1.4-4.3 ms). The indexes change no answer, only the plan; a jar whose
internals differ leaves them out and says so in its log.

It is compiled once per source text into a cache folder (next to the jar, or the temp
folder when that is read-only), in a scratch folder renamed into place, so two processes
compiling at once never see half a class file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from whimbrel.local.dynamodb_install import DynamoDBLocalError

__all__ = ["ALL_INTERFACES", "LAUNCHER_CLASS", "launcher_classpath"]

#: The host that means "every interface": the jar is run as is, without the launcher.
ALL_INTERFACES = "0.0.0.0"

LAUNCHER_CLASS = "WhimbrelDynamoDBLocal"

_SOURCE = """\
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.Map;

/** Whimbrel: start DynamoDB Local with its Jetty connectors bound to args[0]. */
public final class WhimbrelDynamoDBLocal {
    /** Indexes DynamoDB Local's own SQLite schema lacks (see the Python module). */
    static final String[] INDEXES = {
        "CREATE INDEX IF NOT EXISTS whimbrel_us_stream ON us(StreamID, SequenceNumber)",
        "CREATE INDEX IF NOT EXISTS whimbrel_us_shard ON us(ShardID, SequenceNumber)",
        "CREATE INDEX IF NOT EXISTS whimbrel_sm_table ON sm(TableName)",
        "CREATE INDEX IF NOT EXISTS whimbrel_ss_stream ON ss(StreamID)",
    };

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        Class<?> runner = Class.forName(
            "software.amazon.dynamodb.services.local.main.ServerRunner");
        Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class)
            .invoke(null, (Object) rest);
        Field field = proxy.getClass().getDeclaredField("server");
        field.setAccessible(true);
        Object jetty = field.get(proxy);
        Object[] connectors = (Object[]) jetty.getClass().getMethod("getConnectors")
            .invoke(jetty);
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local's server has no connector");
        }
        for (Object connector : connectors) {
            connector.getClass().getMethod("setHost", String.class).invoke(connector, host);
        }
        proxy.getClass().getMethod("start").invoke(proxy);
        System.out.println("whimbrel: DynamoDB Local bound to " + host);
        Thread indexer = new Thread(() -> addIndexes(proxy), "whimbrel-indexes");
        indexer.setDaemon(true);
        indexer.start();
    }

    /** Once the database exists (made on the first request), add INDEXES on its queue. */
    static void addIndexes(Object proxy) {
        try {
            for (int i = 0; i < 6000; i++) {
                Object access = find(proxy);
                if (access != null) {
                    Object queue = null;
                    for (Class<?> c = access.getClass(); c != null; c = c.getSuperclass()) {
                        for (Field f : c.getDeclaredFields()) {
                            if (f.getType() == com.almworks.sqlite4java.SQLiteQueue.class) {
                                f.setAccessible(true);
                                queue = f.get(access);
                            }
                        }
                    }
                    if (queue == null) {
                        System.out.println("whimbrel: no SQLite queue; indexes not added");
                        return;
                    }
                    Object done = ((com.almworks.sqlite4java.SQLiteQueue) queue)
                        .execute(new IndexJob()).complete();
                    System.out.println("whimbrel: stream indexes " + done);
                    return;
                }
                Thread.sleep(20);
            }
            System.out.println("whimbrel: no database seen in 120 s; indexes not added");
        } catch (Throwable e) {
            System.out.println("whimbrel: indexes not added: " + e);
        }
    }

    static final class IndexJob extends com.almworks.sqlite4java.SQLiteJob<String> {
        @Override
        protected String job(com.almworks.sqlite4java.SQLiteConnection connection)
                throws Throwable {
            for (String sql : INDEXES) {
                connection.exec(sql);
            }
            return "added";
        }
    }

    /** The SQLiteDBAccess reachable from the server, by DynamoDB Local's own fields. */
    static Object find(Object root) throws IllegalAccessException {
        IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
        ArrayDeque<Object> todo = new ArrayDeque<>();
        todo.add(root);
        while (!todo.isEmpty() && seen.size() < 10000) {
            Object o = todo.poll();
            if (o == null || seen.put(o, Boolean.TRUE) != null) {
                continue;
            }
            if (o.getClass().getName().endsWith(".sqlite.SQLiteDBAccess")) {
                return o;
            }
            if (o instanceof Map) {
                todo.addAll(((Map<?, ?>) o).values());
                continue;
            }
            if (o instanceof Collection) {
                todo.addAll((Collection<?>) o);
                continue;
            }
            if (!o.getClass().getName().startsWith("software.amazon.dynamodb")) {
                continue;
            }
            for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
                for (Field f : c.getDeclaredFields()) {
                    if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) {
                        continue;
                    }
                    try {
                        f.setAccessible(true);
                        todo.add(f.get(o));
                    } catch (RuntimeException e) {
                        // a module the JVM keeps closed: not DynamoDB Local's own state
                    }
                }
            }
        }
        return null;
    }
}
"""

_COMPILE_TIMEOUT = 180.0


def launcher_classpath(jar_directory: Path, java: str) -> Path:
    """The folder holding the compiled launcher class, compiling it on first use.

    Args:
        jar_directory: The folder of ``DynamoDBLocal.jar``; the class is cached in
            ``.whimbrel-launcher/<hash>`` under it (or under the temp folder when that
            folder is not writable).
        java: The ``java`` that will run it; its ``javac`` is preferred.

    Raises:
        DynamoDBLocalError: No ``javac`` (a JRE without a JDK), or it failed.
    """
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    for root in (jar_directory / ".whimbrel-launcher",
                 Path(tempfile.gettempdir()) / f"whimbrel-launcher-{os.getuid()}"):
        target = root / digest
        if (target / f"{LAUNCHER_CLASS}.class").is_file():
            return target
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue  # read-only: the next root
        if os.access(root, os.W_OK):
            _compile(root, target, java, jar_directory)
            return target
    raise DynamoDBLocalError("no writable folder to compile the DynamoDB Local launcher in")


def _compile(root: Path, target: Path, java: str, jar_directory: Path) -> None:
    javac = _find_javac(java)
    scratch = Path(tempfile.mkdtemp(prefix=".compiling-", dir=root))
    try:
        source = scratch / f"{LAUNCHER_CLASS}.java"
        source.write_text(_SOURCE, encoding="utf-8")
        sqlite = jar_directory / "DynamoDBLocal_lib" / "sqlite4java.jar"  # beside the jar
        done = subprocess.run([javac, "-cp", str(sqlite), "-d", str(scratch), str(source)],
                              capture_output=True,
                              text=True, timeout=_COMPILE_TIMEOUT, check=False)
        if done.returncode != 0:
            raise DynamoDBLocalError(
                f"javac could not compile the DynamoDB Local launcher:\n{done.stderr[-2000:]}",
                returncode=done.returncode)
        try:
            scratch.rename(target)
        except OSError:
            # Another process renamed its copy first; the same source gives the same class.
            if not (target / f"{LAUNCHER_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _find_javac(java: str) -> str:
    beside = Path(java).resolve().parent / "javac"
    if beside.is_file():
        return str(beside)
    found = shutil.which("javac")
    if found is None:
        raise DynamoDBLocalError(
            "javac not found: binding DynamoDB Local to one address needs a JDK (17+), not "
            f"only a JRE (java is {java}). Install a JDK, or pass host={ALL_INTERFACES!r} "
            "(`whimbrel dev --host 0.0.0.0`) to listen on every interface")
    return found
