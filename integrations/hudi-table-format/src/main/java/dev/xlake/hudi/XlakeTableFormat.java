package dev.xlake.hudi;

import java.util.List;
import java.util.Properties;
import java.util.function.Supplier;
import org.apache.hudi.avro.model.HoodieCleanMetadata;
import org.apache.hudi.common.HoodieTableFormat;
import org.apache.hudi.common.NativeTableFormat;
import org.apache.hudi.common.engine.HoodieEngineContext;
import org.apache.hudi.common.model.HoodieCommitMetadata;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.TimelineFactory;
import org.apache.hudi.common.table.timeline.TimelineLayout;
import org.apache.hudi.common.table.timeline.versioning.TimelineLayoutVersion;
import org.apache.hudi.common.table.view.FileSystemViewManager;
import org.apache.hudi.exception.HoodieException;
import org.apache.hudi.metadata.TableMetadataFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Hudi table format {@code xlake} ({@code hoodie.table.format=xlake}): each callback Hudi
 * makes after an action completes runs the xlake binary on the table, so the Iceberg mirror in
 * the table's {@code metadata/} folder is written in the commit path; a failed mirror fails the
 * Hudi operation. The timeline this format hands Hudi ({@link MirroredTimelineFactory}) counts
 * a write as completed only once the mirror holds its snapshot, so the next writer rolls back a
 * write whose mirror failed.
 *
 * <p>Copy-on-write tables only: a merge-on-read table is refused when Hudi loads its config.
 */
public class XlakeTableFormat implements HoodieTableFormat {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(XlakeTableFormat.class);

  /** The name {@code hoodie.table.format} selects this format by. */
  public static final String NAME = "xlake";

  private final Properties tableConfig = new Properties();
  private TimelineLayoutVersion layoutVersion =
      new TimelineLayoutVersion(TimelineLayoutVersion.CURR_VERSION);

  @Override
  public String getName() {
    return NAME;
  }

  @Override
  public void init(Properties properties) {
    tableConfig.clear();
    tableConfig.putAll(properties);
    String table = properties.getProperty("hoodie.table.name", "?");
    String type = properties.getProperty("hoodie.table.type", "COPY_ON_WRITE");
    if (!"COPY_ON_WRITE".equals(type)) {
      throw new HoodieException(
          "hoodie.table.format=xlake: table " + table + " is " + type
              + "; xlake mirrors copy-on-write tables only in the commit path (a merge-on-read"
              + " table's log files would be invisible to Iceberg readers). Write it as"
              + " COPY_ON_WRITE, or drop hoodie.table.format and run `xlake sync"
              + " --mor-read-optimized` as a job step.");
    }
    String layout = properties.getProperty("hoodie.timeline.layout.version");
    if (layout != null) {
      layoutVersion = new TimelineLayoutVersion(Integer.parseInt(layout.trim()));
    }
    if (layoutVersion.getVersion() < TimelineLayoutVersion.VERSION_2) {
      throw new HoodieException(
          "hoodie.table.format=xlake: table " + table + " has timeline layout version "
              + layoutVersion.getVersion() + "; the xlake format needs table version 8 or later"
              + " (Hudi 1.x)");
    }
  }

  @Override
  public void commit(
      HoodieCommitMetadata commitMetadata,
      HoodieInstant completedInstant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    mirror(completedInstant, engineContext, metaClient, true);
  }

  @Override
  public void clean(
      HoodieCleanMetadata cleanMetadata,
      HoodieInstant completedInstant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    mirror(completedInstant, engineContext, metaClient, false);
  }

  @Override
  public void archive(
      Supplier<List<HoodieInstant>> archivedInstants,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    List<HoodieInstant> archived = archivedInstants.get();
    if (!archived.isEmpty()) {
      mirror(archived.get(archived.size() - 1), engineContext, metaClient, false);
    }
  }

  /**
   * Called before Hudi rolls back a completed instant (a restore's steps): nothing changed yet,
   * so nothing to mirror; the rollback's own instant is mirrored by {@link #completedRollback}.
   */
  @Override
  public void rollback(
      HoodieInstant instant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    LOG.info("xlake: {} is about to be rolled back", instant);
  }

  @Override
  public void completedRollback(
      HoodieInstant rollbackInstant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    mirror(rollbackInstant, engineContext, metaClient, true);
  }

  @Override
  public void savepoint(
      HoodieInstant savepointInstant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    mirror(savepointInstant, engineContext, metaClient, false);
  }

  @Override
  public void restore(
      HoodieInstant restoreCompletedInstant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      FileSystemViewManager viewManager) {
    mirror(restoreCompletedInstant, engineContext, metaClient, true);
  }

  @Override
  public TimelineFactory getTimelineFactory() {
    return new MirroredTimelineFactory(TimelineLayout.fromVersion(layoutVersion));
  }

  @Override
  public TableMetadataFactory getMetadataFactory() {
    return new NativeTableFormat(layoutVersion).getMetadataFactory();
  }

  /**
   * Runs {@code xlake commit --instant} for an instant that gets a snapshot, else {@code xlake
   * sync} (clean, savepoint, archive: nothing of theirs is mirrored, but the mirror must be up to
   * date). On failure a write instant is turned back to inflight, so neither Hudi nor xlake
   * counts it, and the operation fails with xlake's own error text.
   */
  private void mirror(
      HoodieInstant instant,
      HoodieEngineContext engineContext,
      HoodieTableMetaClient metaClient,
      boolean snapshot) {
    String table = XlakeCommand.tableLocation(metaClient.getBasePath());
    try {
      XlakeCommand xlake = XlakeCommand.resolve(tableConfig, engineContext.getStorageConf());
      if (snapshot) {
        xlake.run("commit", table, "--instant", instant.requestedTime());
      } else {
        xlake.run("sync", table);
      }
    } catch (XlakeCommand.MirrorFailure e) {
      String reverted = revert(instant, metaClient, snapshot);
      throw new HoodieException(
          "xlake could not mirror " + instant.getAction() + " " + instant.requestedTime()
              + " of " + table + "; the operation fails" + reverted + ": " + e.getMessage(),
          e);
    }
  }

  /** Turns a completed write instant back to inflight; says what it did, for the error. */
  private static String revert(
      HoodieInstant instant, HoodieTableMetaClient metaClient, boolean snapshot) {
    if (!snapshot || !instant.isCompleted() || !MirrorState.isWrite(instant)) {
      return "";
    }
    try {
      metaClient.getActiveTimelineForNativeFormat().revertToInflight(instant);
      return " and " + instant.requestedTime() + " is back to inflight (the next write rolls it"
          + " back)";
    } catch (RuntimeException e) {
      LOG.error("xlake: could not turn {} back to inflight", instant, e);
      return " (" + instant.requestedTime() + " stays completed in .hoodie/timeline, but the"
          + " xlake timeline does not count it: " + e + ")";
    }
  }
}
