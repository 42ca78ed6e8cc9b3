// Creates Hive Metastore 3.x's transaction and lock tables (TXNS, HIVE_LOCKS, ...) in the
// database metastore-site.xml names, as the metastore's own tests do (TxnDbUtil.prepDb):
// the schema DataNucleus creates on first start has no lock tables, and the schematool's
// scripts are not in the jars. Run by catalog_servers.py as a single-file source program.
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;

public class HmsLockTables {
  public static void main(String[] args) throws Exception {
    TxnDbUtil.prepDb(MetastoreConf.newMetastoreConf());
  }
}
